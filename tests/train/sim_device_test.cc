// The simulated device (--device sim, core/device.h): host memory and the CPU kernels behind a
// GPU's data path. A training run on it keeps its parameters, optimizer state and BN statistics
// off the host, copies every batch in, reads the losses and norms back and stages its
// checkpoints, as a run on a GPU does, and must end bitwise where the same run on the host ends,
// across a resume. Any op handed a host tensor on it, or host code touching its parameters, is an
// error rather than silent success.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/core/error.h"
#include "kiln/io/host_staging.h"
#include "kiln/dist/staged_communicator.h"
#include "kiln/nn/params.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/config/resnet_config.h"
#include "kiln/train/recipes/bert.h"
#include "kiln/train/recipes/resnet.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"
#include "tests/train/tiny_runs.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;
using testing::error_of;
using testing::with_flags;

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

// The checkpoint files a run ends with must match byte for byte (meta.json records the device).
void expect_same_checkpoint(const fs::path& a, const fs::path& b) {
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(file_bytes(a / file) == file_bytes(b / file)) << file << " differs: " << a << " vs " << b;
}

// The "grad norm X" field of every console line.
std::vector<std::string> grad_norms(const std::string& console) {
  std::vector<std::string> norms;
  const std::string key = "grad norm ";
  for (size_t at = console.find(key); at != std::string::npos; at = console.find(key, at + 1))
    norms.push_back(console.substr(at + key.size(), console.find(' ', at + key.size()) - at - key.size()));
  return norms;
}

template <typename T>
std::vector<T> joined(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

BertTrainConfig bert(const testing::TinyBert& data, const std::vector<std::string>& extra) {
  return testing::config_from_flags(register_bert_config, finalize_bert_config, with_flags(data.flags, extra));
}

ResNetTrainConfig resnet(const testing::TinyResNet& data, const std::vector<std::string>& extra) {
  return testing::config_from_flags(register_resnet_config, finalize_resnet_config, with_flags(data.flags, extra));
}

TEST(SimDevice, BertTrainsBitwiseAsOnTheHostAcrossAResume) {
  const fs::path dir = testing::unique_temp_dir("sim_bert");
  const testing::TinyBert data = testing::tiny_bert(dir / "data");
  const testing::ThreadsRestored threads;
  std::ostringstream console;
  for (const std::string precision : {"f32", "bf16"}) {
    auto run = [&](const std::string& name, const std::string& device, int exit) {
      const fs::path out = dir / precision / name;
      std::vector<std::string> flags = {"--device", device, "--output-dir", out.string(), "--save",
                                        (out / "ckpt").string(), "--load", (out / "ckpt").string(),
                                        "--save-interval", "4", "--eval-interval", "4", "--exit-interval",
                                        std::to_string(exit)};
      if (precision == "bf16") flags.push_back("--bf16");
      return train_bert(bert(data, flags), {}, console);
    };
    const BertRunResult host = run("host", "cpu", 8);
    const BertRunResult first = run("sim", "sim", 4);
    const BertRunResult resumed = run("sim", "sim", 8);
    ASSERT_EQ(host.losses.size(), 8u) << console.str();
    EXPECT_EQ(joined(first.losses, resumed.losses), host.losses) << precision;
    ASSERT_EQ(host.evals.size(), 2u);
    ASSERT_EQ(first.evals.size() + resumed.evals.size(), 2u);
    EXPECT_EQ(resumed.evals[0].mlm_loss, host.evals[1].mlm_loss) << precision;
    expect_same_checkpoint(host.checkpoint, resumed.checkpoint);
  }
  EXPECT_NE(console.str().find("device "), std::string::npos) << "the console line reports device memory";
}

TEST(SimDevice, ResNetTrainsBitwiseAsOnTheHostAcrossAResume) {
  const fs::path dir = testing::unique_temp_dir("sim_resnet");
  const testing::TinyResNet data = testing::tiny_resnet(dir / "images");
  const testing::ThreadsRestored threads;
  std::ostringstream console;
  const std::string epoch = std::to_string(data.steps_per_epoch);
  auto run = [&](const std::string& name, const std::string& device, int64_t exit) {
    const fs::path out = dir / name;
    return train_resnet(resnet(data, {"--device", device, "--bf16", "--output-dir", out.string(), "--save",
                                      (out / "ckpt").string(), "--load", (out / "ckpt").string(),
                                      "--exit-interval", std::to_string(exit)}),
                        {}, console);
  };
  const ResNetRunResult host = run("host", "cpu", 2 * data.steps_per_epoch);
  const ResNetRunResult first = run("sim", "sim", data.steps_per_epoch);
  const ResNetRunResult resumed = run("sim", "sim", 2 * data.steps_per_epoch);
  ASSERT_EQ(host.losses.size(), size_t(2 * data.steps_per_epoch)) << console.str();
  EXPECT_EQ(joined(first.losses, resumed.losses), host.losses);
  EXPECT_EQ(joined(first.eval_top1, resumed.eval_top1), host.eval_top1);
  expect_same_checkpoint(host.checkpoint, resumed.checkpoint);
  // The BN running statistics travel with the weights (buffers in model.safetensors).
  // Each sim run of 4 steps captures its optimizer phase and its micro-batch (the images' copy to
  // the loss's read-back) at its second step and replays them at the next two.
  EXPECT_NE(console.str().find("graphs: 2 captured, 4 replays"), std::string::npos) << console.str();
}

// fp16 with a loss scale too high for the first steps: the optimizer phase is captured after the
// first step and replayed (backend/graph.h), and its skip, clip and loss-scale decisions, taken
// on the device from the step's scalars, must match the host's step for step. With KILN_GRAPH=0
// the sim runs the same ops one by one.
TEST(SimDevice, ReplayedOptimizerPhaseSkipsClipsAndScalesAsOnTheHost) {
  const fs::path dir = testing::unique_temp_dir("sim_graph");
  const testing::TinyBert data = testing::tiny_bert(dir / "data");
  const testing::ThreadsRestored threads;
  auto run = [&](const std::string& name, const std::string& device, std::ostream& console) {
    const fs::path out = dir / name;
    return train_bert(bert(data, {"--device", device, "--fp16", "--initial-loss-scale", "1e6", "--loss-scale-window",
                                  "3", "--clip-grad", "0.5", "--output-dir", out.string(), "--save",
                                  (out / "ckpt").string(), "--save-interval", "8", "--train-iters", "8",
                                  "--log-interval", "1"}),
                      {}, console);
  };
  std::ostringstream host_console, sim_console, eager_console;
  const BertRunResult host = run("host", "cpu", host_console);
  const BertRunResult sim = run("sim", "sim", sim_console);
  ASSERT_GT(host.skipped_steps, 0) << host_console.str();
  ASSERT_LT(host.skipped_steps, 8) << host_console.str();
  EXPECT_EQ(sim.skipped_steps, host.skipped_steps);
  EXPECT_EQ(sim.losses, host.losses);
  EXPECT_EQ(sim.loss_scale, host.loss_scale);
  // The unscaled gradients' norms too: a frozen 1/scale would be hidden in the weights (the scales
  // differ by powers of two, which clipping and LAMB undo exactly) but not here.
  EXPECT_EQ(grad_norms(sim_console.str()), grad_norms(host_console.str()));
  EXPECT_EQ(grad_norms(host_console.str()).size(), 8u);
  expect_same_checkpoint(host.checkpoint, sim.checkpoint);
  // The optimizer phase captured at step 2 and replayed at steps 3-8: the evaluation at step 5
  // takes its scratch (the f16 products' f32 copies) within the arena the steps sized, so the
  // addresses hold. The micro-batch is keyed by the loss scale too, which the skips change: each
  // scale runs op by op once, then is captured, then replayed.
  EXPECT_NE(sim_console.str().find("graphs: 3 captured, 8 replays"), std::string::npos) << sim_console.str();
  EXPECT_EQ(host_console.str().find("graphs:"), std::string::npos);
  setenv("KILN_GRAPH", "0", 1);
  const BertRunResult eager = run("eager", "sim", eager_console);
  unsetenv("KILN_GRAPH");
  EXPECT_NE(eager_console.str().find("graphs: off (KILN_GRAPH=0)"), std::string::npos);
  EXPECT_EQ(eager.losses, host.losses);
}

// Two micro-batches per step with dropout: the layers' forward and backward replayed from graphs
// take each micro-batch's sample offset from device memory (the masks move with the samples), the
// first micro-batch's backward overwrites the layers' gradients and the second adds to them, as on
// the host, and the host knows which gradients a replay wrote (else the step would zero them).
TEST(SimDevice, ReplayedLayersTrainMicroBatchesWithDropoutAsOnTheHost) {
  const fs::path dir = testing::unique_temp_dir("sim_layers");
  const testing::TinyBert data = testing::tiny_bert(dir / "data");
  const testing::ThreadsRestored threads;
  auto run = [&](const std::string& name, const std::string& device, std::ostream& console) {
    const fs::path out = dir / name;
    return train_bert(bert(data, {"--device", device, "--micro-batch-size", "4", "--hidden-dropout", "0.3",
                                  "--attention-dropout", "0.3", "--output-dir", out.string(), "--save",
                                  (out / "ckpt").string(), "--save-interval", "7", "--train-iters", "7",
                                  "--eval-interval", "100", "--log-interval", "1"}),
                      {}, console);
  };
  std::ostringstream host_console, sim_console, eager_console;
  const BertRunResult host = run("host", "cpu", host_console);
  const BertRunResult sim = run("sim", "sim", sim_console);
  EXPECT_EQ(sim.losses, host.losses);
  EXPECT_EQ(grad_norms(sim_console.str()), grad_norms(host_console.str()));
  expect_same_checkpoint(host.checkpoint, sim.checkpoint);
  // The micro-batch (forward and backward): a graph per state of the gradients (first or later
  // micro-batch), run op by op at step 1, captured at step 2, replayed at steps 3-7 (10). The
  // optimizer phase: captured at step 2, replayed at steps 3-7 (5).
  EXPECT_NE(sim_console.str().find("graphs: 3 captured, 15 replays"), std::string::npos) << sim_console.str();
  setenv("KILN_GRAPH", "0", 1);
  const BertRunResult eager = run("eager", "sim", eager_console);
  unsetenv("KILN_GRAPH");
  EXPECT_EQ(eager.losses, host.losses);
  // The losses depend on the masks: without dropout they differ.
  std::ostringstream plain_console;
  const fs::path plain = dir / "plain";
  const BertRunResult no_dropout =
      train_bert(bert(data, {"--device", "sim", "--micro-batch-size", "4", "--hidden-dropout", "0",
                             "--attention-dropout", "0", "--output-dir", plain.string(), "--train-iters", "7",
                             "--eval-interval", "100"}),
                 {}, plain_console);
  EXPECT_NE(no_dropout.losses, host.losses);
}

TEST(SimDevice, HostCodeCannotTouchParametersThatLiveOnTheDevice) {
  Context sim = device_context(Device::sim());
  ParamStore store;
  const Param p = store.add("w", {4}, true);
  store.allocate();
  std::fill(p.w(), p.w() + 4, 2.5f);
  store.to_device(sim);
  EXPECT_EQ(store.values.device, Device::sim());
  EXPECT_EQ(error_of([&] { (void)p.w(); }), "parameter store: host access to parameters that live on sim");
  const std::vector<float> values = store.values_vector(), grads = store.grads_vector();  // read back by copy
  EXPECT_EQ(std::vector<float>(values.begin(), values.begin() + 4), std::vector<float>(4, 2.5f));
  EXPECT_EQ(std::vector<float>(grads.begin(), grads.begin() + 4), std::vector<float>(4, 0.0f));
}

TEST(SimDevice, OpsRefuseHostTensorsAndCopyMovesThem) {
  Context sim = device_context(Device::sim());
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  const Tensor host_a = Tensor::view(a.data(), {3}), host_b = Tensor::view(b.data(), {3});
  Tensor out = Tensor::empty({3}, DType::f32, Device::sim());
  EXPECT_EQ(error_of([&] { ops::add(sim, host_a, host_b, out); }),
            "op add: a tensor of shape (3) is on cpu but the op runs on sim");
  const Tensor dev_a = ops::on_device(sim, host_a), dev_b = ops::on_device(sim, host_b);
  ops::add(sim, dev_a, dev_b, out);
  EXPECT_EQ(to_float_vector(ops::on_host(sim, out)), std::vector<float>({11, 22, 33}));
}

// The staged communicator on one process: device tensors go through host copies and come back.
TEST(SimDevice, StagedCollectivesMoveDeviceTensorsThroughTheHost) {
  Context sim = device_context(Device::sim());
  dist::SingleProcess host;
  dist::StagedCommunicator comm(host, Device::sim());
  std::vector<float> v = {1, 2, 3};
  Tensor t = ops::on_device(sim, Tensor::view(v.data(), {3}));
  comm.all_reduce_sum(t);
  comm.iall_reduce_sum(t)->wait();
  comm.broadcast(t, 0);
  Tensor gathered = Tensor::empty({3}, DType::f32, Device::sim());
  comm.all_gather(t, gathered);
  EXPECT_EQ(to_float_vector(ops::on_host(sim, gathered)), v);
  EXPECT_EQ(error_of([&] { comm.send(t, 1); }), "send to rank 1: a single process has no other rank");
  // NCCL takes no mixed pair, so neither does the staged transport that stands in for it.
  Tensor host_out = Tensor::empty({3});
  EXPECT_EQ(error_of([&] { comm.all_gather(t, host_out); }),
            "all_gather: input on sim and output on cpu: a device transport takes both on the device or both on "
            "the host");
}

}  // namespace
}  // namespace kiln::train
