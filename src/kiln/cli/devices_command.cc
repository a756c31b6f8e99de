// cli/devices_command.cc — `kiln devices` and `kiln --version`: the backends compiled into this
// kiln and the devices present.
#include <fmt/format.h>

#include <iostream>

#include "kiln/backend/devices.h"
#include "kiln/cli/commands.h"

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
  cmd->callback([] { std::cout << version_text() << "\n"; });
}

}  // namespace kiln::cli
