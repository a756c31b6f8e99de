// dist/world.h — the process's world communicator, chosen once at start: MPI when the process
// was started by an MPI launcher (mpirun, srun) and kiln was built with MPI, one process
// otherwise. Started by a launcher with several processes but built without MPI: an error.
#pragma once
#include "kiln/dist/communicator.h"

namespace kiln::dist {

// What the launcher that started this process says, read from its variables:
//   mpirun (OpenMPI)               OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK
//   srun --mpi=pmi2, MPICH's Hydra PMI_SIZE, PMI_RANK
//   srun --mpi=pmix                SLURM_STEP_NUM_TASKS, PMIX_RANK
//   srun (other plugins)           SLURM_STEP_NUM_TASKS, SLURM_PROCID
// (SLURM_STEP_NUM_TASKS is set by srun only, not in a batch script's own shell.)
struct Launcher {
  const char* name = "";  // "" when not started by a launcher
  int size = 0;           // processes started; 0 when not started by a launcher
  int rank = 0;
};
Launcher detect_launcher();
int launcher_world_size();  // detect_launcher().size
// Throws kiln::Error unless `world` (MPI's view) has the launcher's size and rank: a launcher whose
// protocol the MPI library does not speak (srun --mpi=pmix with an MPI built without PMIx) leaves
// every process a world of its own, N copies of one run writing the same files.
void check_launched_world(const Launcher& launcher, const Communicator& world);

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
