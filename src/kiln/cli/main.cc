// cli/main.cc — the `kiln` executable: dispatches to subcommands, turns errors into one line.
#include <cstdio>
#include <exception>
#include <string>

#include "kiln/cli/commands.h"
#include "kiln/core/error.h"

int main(int argc, char** argv) {
  try {
    return kiln::cli::run(argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: internal error: %s\n", e.what());
    return 3;
  }
}
