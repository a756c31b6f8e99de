// cli/commands.h — the subcommands of `kiln`.
#pragma once

namespace kiln::cli {

int run(int argc, char** argv);

}  // namespace kiln::cli
