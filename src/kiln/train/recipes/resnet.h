// train/recipes/resnet.h — `kiln train resnet`: MLPerf ResNet-50 training, a recipe of the shared
// training loop (train/loop.h).
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "kiln/train/config/resnet_config.h"

namespace kiln::train {

struct ResNetRunResult {
  int64_t steps = 0;                 // optimizer steps completed (including resumed ones)
  int64_t epochs = 0;                // epochs completed
  std::vector<double> losses;        // training loss of each step this process ran (skipped too)
  int64_t skipped_steps = 0;         // skipped for a non-finite loss or gradient norm
  double loss_scale = 1;             // at the end
  std::vector<double> eval_top1;     // in order
  int64_t bad_images = 0;            // unreadable training images skipped
  bool reached_target = false;
  std::filesystem::path log_file;    // result_resnet_<seed>.log
  std::filesystem::path checkpoint;  // newest checkpoint written, if any
};

ResNetRunResult train_resnet(const ResNetTrainConfig& config,
                             const std::vector<std::pair<std::string, std::string>>& resolved,
                             std::ostream& console);

}  // namespace kiln::train
