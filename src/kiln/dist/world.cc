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

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const int n = env_int(name); n > 0) return n;
  return 0;
}

void init(int& argc, char**& argv) {
  const int launched = launcher_world_size();
#ifdef KILN_HAVE_MPI
  if (launched == 0) return;
  int provided = 0;
  // MULTIPLE: overlapped gradient buckets reduce on a thread of their own (dist/async_collectives.h).
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  mpi_started = true;
  current() = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
#else
  if (launched > 1)
    throw Error("started as {} processes, but this kiln was built without MPI (install libopenmpi-dev and "
                "rebuild)", launched);
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
