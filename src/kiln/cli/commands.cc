#include "kiln/cli/commands.h"

#include <CLI/CLI.hpp>

namespace kiln::cli {

int run(int argc, char** argv) {
  CLI::App app{"kiln: MLPerf-style BERT and ResNet-50 training"};
  app.require_subcommand(1);
  add_tokenize_command(app);
  add_prepare_command(app);
  add_train_command(app);
  add_images_command(app);
  add_cpu_command(app);
  add_checkpoint_command(app);
  add_devices_command(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}

}  // namespace kiln::cli
