// `kiln devices` / `kiln --version` list the backends and devices (`--versions`: and the GPU
// libraries' versions); `--device` for a device that cannot run the step is one line on stderr
// naming it, exit code 2.
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/run_command.h"

namespace {

using kiln::testing::Capture;
using kiln::testing::run_command;

TEST(DevicesCommand, ListsBackendsAndDevices) {
  for (const char* args : {" devices", " --version"}) {
    const auto [code, out] = run_command(std::string(KILN_BINARY) + args, Capture::combined);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("backends: cpu"), std::string::npos) << out;
    EXPECT_NE(out.find("devices:\n  cpu"), std::string::npos) << out;
  }
}

TEST(DevicesCommand, VersionsListsTheGpuLibraries) {
  const auto [code, out] = run_command(std::string(KILN_BINARY) + " devices --versions", Capture::combined);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("devices:\n  cpu"), std::string::npos) << out;
  const size_t libraries = out.find("libraries:\n  ");
  ASSERT_NE(libraries, std::string::npos) << out;
  // A CPU-only kiln says CUDA is not built in; a CUDA one names each library, loaded or not.
  const bool cuda = out.find("backends: cpu, cuda") != std::string::npos;
  for (const char* library : {"cuBLASLt: ", "cuDNN: ", "CUDA driver: "})
    EXPECT_EQ(out.find(library, libraries) != std::string::npos, cuda) << out;
  EXPECT_NE(out.find("  NCCL: ", libraries), std::string::npos) << out;
}

const std::string kTrain = std::string(KILN_BINARY) + " train bert --config " KILN_SOURCE_DIR
                           "/configs/bert-tiny.toml --fake-data --seq-length 32 --benchmark 1 --device ";

void expect_one_line_error(const std::string& device, const std::string& must_name) {
  const auto [code, err] = run_command(kTrain + device + " --output-dir /nonexistent", Capture::stderr_only);
  EXPECT_EQ(code, 2) << err;
  EXPECT_EQ(err.find("kiln: error:"), 0u) << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "error is not one line: " << err;
  EXPECT_NE(err.find(must_name), std::string::npos) << err;
}

TEST(DevicesCommand, TrainOnCudaIsAOneLineError) { expect_one_line_error("cuda", "cuda:0"); }

TEST(DevicesCommand, UnknownDeviceNamesTheKey) { expect_one_line_error("tpu", "train.device"); }

}  // namespace
