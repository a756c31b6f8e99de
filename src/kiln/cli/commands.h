// cli/commands.h — the subcommands of `kiln`; each lives in its own *_command.cc.
#pragma once
#include <CLI/CLI.hpp>

namespace kiln::cli {

int run(int argc, char** argv);

void add_tokenize_command(CLI::App& app);  // kiln tokenize
void add_prepare_command(CLI::App& app);   // kiln prepare bert | indexed
void add_train_command(CLI::App& app);     // kiln train bert | resnet
void add_images_command(CLI::App& app);    // kiln images check | from-idx
void add_cpu_command(CLI::App& app);       // kiln cpu
void add_checkpoint_command(CLI::App& app);  // kiln checkpoint export | import
void add_devices_command(CLI::App& app);   // kiln devices, kiln --version

}  // namespace kiln::cli
