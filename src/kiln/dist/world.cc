#include "kiln/dist/world.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "kiln/core/error.h"
#ifdef KILN_HAVE_MPI
#include "kiln/dist/mpi/mpi_communicator.h"  // and <mpi.h>
#endif

namespace kiln::dist {
namespace {

std::unique_ptr<Communicator>& current() {
  static std::unique_ptr<Communicator> comm = std::make_unique<SingleProcess>();
  return comm;
}
bool mpi_started = false;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : 0;
}

}  // namespace

Launcher detect_launcher() {
  struct Variables {
    const char* name;
    const char* size;
    const char* rank;
  };
  static constexpr Variables kLaunchers[] = {
      {"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
      {"PMI (srun --mpi=pmi2 or Hydra)", "PMI_SIZE", "PMI_RANK"},
      {"srun --mpi=pmix", "SLURM_STEP_NUM_TASKS", "PMIX_RANK"},
      {"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"},
  };
  for (const Variables& v : kLaunchers) {
    const char* rank = std::getenv(v.rank);
    if (const int n = env_int(v.size); n > 0 && rank && *rank) return {v.name, n, std::atoi(rank)};
  }
  return {};
}

int launcher_world_size() { return detect_launcher().size; }

void check_launched_world(const Launcher& launcher, const Communicator& world) {
  if (world.size() == launcher.size && world.rank() == launcher.rank) return;
  throw Error("{} started {} processes (this one rank {}), but MPI sees rank {} of {}: this MPI library does not "
              "speak that launcher's protocol (with srun, try --mpi=pmix or --mpi=pmi2, or use mpirun)",
              launcher.name, launcher.size, launcher.rank, world.rank(), world.size());
}

void init(int& argc, char**& argv) {
  const Launcher launcher = detect_launcher();
#ifdef KILN_HAVE_MPI
  if (launcher.size == 0) return;
  int provided = 0;
  // MULTIPLE: overlapped gradient buckets reduce on a thread of their own (dist/async_collectives.h).
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  mpi_started = true;
  current() = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
  check_launched_world(launcher, *current());
#else
  if (launcher.size > 1)
    throw Error("{} started {} processes, but this kiln was built without MPI (install libopenmpi-dev and "
                "rebuild)", launcher.name, launcher.size);
#endif
}

Communicator& world() { return *current(); }

void finalize() {
#ifdef KILN_HAVE_MPI
  if (mpi_started) MPI_Finalize();
  mpi_started = false;
#endif
}

void abort(int code) {
#ifdef KILN_HAVE_MPI
  if (mpi_started && current()->size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

}  // namespace kiln::dist
