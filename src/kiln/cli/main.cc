// cli/main.cc — the `kiln` executable: starts the world (MPI under mpirun), dispatches to
// subcommands, turns errors into one line. An error on one of several ranks ends them all, so
// that none waits forever in a collective.
#include <cstdio>
#include <exception>
#include <string>

#include "kiln/cli/commands.h"
#include "kiln/core/error.h"
#include "kiln/core/notice.h"
#include "kiln/dist/world.h"

namespace {

int fail(int code, const char* kind, const char* what) {
  kiln::dist::Communicator& world = kiln::dist::world();
  if (world.size() > 1) {
    std::fprintf(stderr, "kiln: rank %d: %s: %s\n", world.rank(), kind, what);
    std::fflush(stderr);
    kiln::dist::abort(code);
  }
  std::fprintf(stderr, "kiln: %s: %s\n", kind, what);
  kiln::dist::finalize();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    kiln::dist::init(argc, argv);
    kiln::set_notice_rank(kiln::dist::world().rank(), kiln::dist::world().size());
    const int code = kiln::cli::run(argc, argv);
    kiln::dist::finalize();
    return code;
  } catch (const kiln::Error& e) {
    return fail(2, "error", e.what());
  } catch (const std::exception& e) {
    return fail(3, "internal error", e.what());
  }
}
