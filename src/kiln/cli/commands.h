// cli/commands.h — the subcommands of `kiln`; each lives in its own *_command.cc.
#pragma once
#include <CLI/CLI.hpp>

namespace kiln::cli {

int run(int argc, char** argv);

}  // namespace kiln::cli
