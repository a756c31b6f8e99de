// cli/devices_command.cc — `kiln devices` and `kiln --version`: the backends compiled into this
// kiln and the devices present; `kiln devices --versions` also the CUDA driver's and the GPU
// libraries' versions (tools/gpu_check.sh records them).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "kiln/backend/devices.h"
#include "kiln/cli/commands.h"
#include "kiln/dist/run_world.h"

namespace kiln::cli {

std::string version_text() {
  std::string text =
      fmt::format("kiln {}\nbackends: {}\ndevices:", KILN_VERSION, compiled_backends());
  for (const std::string& line : device_lines()) text += "\n  " + line;
  return text;
}

void add_devices_command(CLI::App& app) {
  app.set_version_flag("--version", [] { return version_text(); });
  CLI::App* cmd =
      app.add_subcommand("devices", "print the backends compiled in and the devices present");
  auto versions = std::make_shared<bool>(false);
  cmd->add_flag("--versions", *versions, "also the CUDA driver's, cuBLASLt's, cuDNN's and NCCL's versions");
  cmd->callback([versions] {
    std::cout << version_text() << "\n";
    if (!*versions) return;
    std::cout << "libraries:\n";
    for (const std::string& line : library_lines()) std::cout << "  " << line << "\n";
    std::cout << "  " << dist::nccl_version_line() << "\n";
  });
}

}  // namespace kiln::cli
