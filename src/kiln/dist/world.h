// dist/world.h — the process's world communicator, chosen once at start: MPI when the process
// was started by an MPI launcher (mpirun, srun) and kiln was built with MPI, one process
// otherwise. Started by a launcher with several processes but built without MPI: an error.
#pragma once
#include "kiln/dist/communicator.h"

namespace kiln::dist {

// Processes the launcher says it started (OpenMPI's OMPI_COMM_WORLD_SIZE; PMI_SIZE, set by
// MPICH's launcher); 0 when not started by one.
int launcher_world_size();

// Call first in main; throws kiln::Error when several processes were launched and kiln was
// built without MPI.
void init(int& argc, char**& argv);
// The communicator init chose (single-process before init).
Communicator& world();
// Ends MPI cleanly (after init); a no-op for one process.
void finalize();
// Ends every process of the world with `code` (MPI_Abort), so that no rank waits forever in a
// collective for a rank that failed; for one process, std::exit(code).
[[noreturn]] void abort(int code);

}  // namespace kiln::dist
