// Every preset in configs/ resolves and dry-runs as `kiln train ... --config FILE --dry-run`, so
// none can rot: memory per device and FLOPs per step for the devices it names.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/testing/run_command.h"

namespace {
namespace fs = std::filesystem;

TEST(Presets, EveryPresetDryRunsForTheDevicesItNames) {
  int presets = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".toml") continue;
    ++presets;
    const std::string name = entry.path().stem().string();
    const std::string recipe = name.starts_with("resnet") ? "resnet" : "bert";
    const auto [status, out] = kiln::testing::run_command(std::string(KILN_BINARY) + " train " + recipe +
                                                          " --config " + entry.path().string() + " --dry-run");
    EXPECT_EQ(status, 0) << name << ":\n" << out;
    EXPECT_NE(out.find("memory per rank"), std::string::npos) << name << ":\n" << out;
    EXPECT_NE(out.find("FLOPs per step"), std::string::npos) << name << ":\n" << out;
    if (name == "bert-large-8xmi300x")
      EXPECT_NE(out.find("TP 1 x PP 1 x DP 8, world size 8; micro batch 128, global batch 1024"), std::string::npos)
          << out;
    if (name == "resnet50-tinybox-green")
      EXPECT_NE(out.find("DP 6; batch 256 per rank, global batch 1536; evaluation batch 32 per rank"),
                std::string::npos)
          << out;
    if (name == "bert-20b")
      EXPECT_NE(out.find("TP 4 x PP 4 x DP 1, world size 16"), std::string::npos) << out;
  }
  EXPECT_GE(presets, 12);
}

}  // namespace
