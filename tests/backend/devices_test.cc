// Backends and devices (backend/devices.h) and what a CUDA request does where no GPU is usable:
// a one-line kiln::Error naming the device or op, never a crash. On a machine with a GPU the
// no-device tests skip (tools/gpu_check.sh runs the parity suite there).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/core/error.h"
#include "tests/testing/cuda_device.h"

namespace kiln {
namespace {

using testing::cuda_device_present;

// Runs fn, which must throw a one-line kiln::Error containing every string of `names`.
template <typename Fn>
void expect_one_line_error(Fn fn, std::initializer_list<const char*> names) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    for (const char* name : names) EXPECT_NE(what.find(name), std::string::npos) << what;
  }
}

TEST(Devices, ListsTheCpuFirst) {
  EXPECT_EQ(compiled_backends().rfind("cpu", 0), 0u);
  const std::vector<std::string> lines = device_lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "cpu");
  const bool cuda_built = compiled_backends().find("cuda") != std::string::npos;
  const bool cuda_listed =
      std::any_of(lines.begin(), lines.end(), [](const std::string& line) { return line.starts_with("cuda"); });
  EXPECT_EQ(cuda_listed, cuda_built);
}

TEST(Devices, ParsesDeviceNames) {
  EXPECT_EQ(parse_device("cpu", "--device"), Device::cpu());
  EXPECT_EQ(parse_device("cuda", "--device"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:3", "--device"), Device::cuda(3));
  // `--device cuda` under mpirun: each rank on a machine takes its own GPU, round robin.
  EXPECT_EQ(local_gpu(2, 8), Device::cuda(2));
  EXPECT_EQ(local_gpu(5, 4), Device::cuda(1));
  EXPECT_EQ(local_gpu(3, 0), Device::cuda(0));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "CPU"})
    expect_one_line_error([&] { parse_device(bad, "--device"); }, {"--device", bad});
  EXPECT_TRUE(device_context(Device::cpu()).device.is_cpu());
}

TEST(Devices, CudaWithoutADeviceIsAOneLineError) {
  if (cuda_device_present()) GTEST_SKIP() << "a CUDA device is present";
  expect_one_line_error([] { device_context(Device::cuda(0)); }, {"cuda:0"});
  expect_one_line_error([] { Tensor::empty({4}, DType::f32, Device::cuda(0)); }, {"cuda:0"});
  Context ctx{Device::cuda(0)};
  Tensor host = Tensor::zeros({4});
  expect_one_line_error([&] { ops::fill(ctx, host, 1.0f); }, {"fill", "cuda:0"});
  expect_one_line_error([&] { ops::add(ctx, host, host, host); }, {"add", "cuda:0"});
  expect_one_line_error([&] { ops::tanh_forward(ctx, host, host); }, {"tanh_forward", "cuda:0"});
  expect_one_line_error([&] { ops::scale_all(ctx, host, 2.0f); }, {"scale_all", "cuda:0"});
  Tensor dev_view = Tensor::view(host.data, {4}, DType::f32, Device::cuda(0));
  expect_one_line_error([&] { ops::copy(cpu_context(), host, dev_view); }, {"cuda:0"});
}

// Every op reaches the CUDA backend on a CUDA context: with host tensors each one stops at the
// device check (naming the op), never at "not implemented".
TEST(Devices, EveryOpHasACudaImplementation) {
  if (compiled_backends().find("cuda") == std::string::npos) GTEST_SKIP() << "built without CUDA";
  Context ctx{Device::cuda(0)};
  Tensor t = Tensor::zeros({2, 2}), none, offset = Tensor::zeros({1}, DType::i64);
  const ops::AdamStep adam;
  const ops::LarsStep lars;
  const ops::ConvShape conv;
  const ops::PoolShape pool;
  const RngStream rng{42, rng_stream(RngPurpose::dropout, 0, 0)};
  const ops::DropoutMask drop{0.1f, rng, offset, 1};
  const std::vector<std::pair<const char*, std::function<void()>>> calls = {
      {"bias_add", [&] { ops::bias_add(ctx, t, t); }},
      {"bias_grad", [&] { ops::bias_grad(ctx, t, t); }},
      {"tanh_backward", [&] { ops::tanh_backward(ctx, t, t, t); }},
      {"dropout_forward", [&] { ops::dropout_forward(ctx, t, {0.1f, rng, offset, 1, 2}, t); }},  // an element offset
      {"dropout_backward", [&] { ops::dropout_backward(ctx, t, {0.1f, rng, offset, 1, 2}, t); }},
      {"softmax_backward", [&] { ops::softmax_backward(ctx, t, t, 1.0f, t); }},
      {"attention_softmax_forward", [&] { ops::attention_softmax_forward(ctx, t, t, t); }},
      {"attention_probs_forward", [&] { ops::attention_probs_forward(ctx, t, t, drop, t, t); }},
      {"attention_probs_backward", [&] { ops::attention_probs_backward(ctx, t, t, drop, 1.0f, t, t); }},
      {"layernorm_backward", [&] { ops::layernorm_backward(ctx, t, t, t, t, t, t, t, t); }},
      {"gather_rows", [&] { ops::gather_rows(ctx, t, t, t); }},
      {"scatter_add_rows", [&] { ops::scatter_add_rows(ctx, t, t, t); }},
      {"softmax_xent_forward", [&] { ops::softmax_xent_forward(ctx, t, t, none, 0, t, t); }},
      {"softmax_xent_backward",
       [&] { ops::softmax_xent_backward(ctx, t, t, t, none, 0, 1, t, {}, t); }},
      {"vocab_xent_partials", [&] { ops::vocab_xent_partials(ctx, t, t, 0, t); }},
      {"vocab_xent_sumexp", [&] { ops::vocab_xent_sumexp(ctx, t, t, t); }},
      {"vocab_xent_combine", [&] { ops::vocab_xent_combine(ctx, t, t); }},
      {"vocab_xent_totals", [&] { ops::vocab_xent_totals(ctx, t, t, t, none, t, t); }},
      {"vocab_xent_backward", [&] { ops::vocab_xent_backward(ctx, t, t, t, none, 0, 1, t, {}, t); }},
      {"segment_sum_squares", [&] { ops::segment_sum_squares(ctx, t, none, {}, t); }},
      {"scale_by_step_scalar", [&] { ops::scale_by_step_scalar(ctx, t, t, ops::kStepUnscale); }},
      {"step_norm_squares", [&] { ops::step_norm_squares(ctx, t, t, t); }},
      {"step_decide", [&] { ops::step_decide(ctx, t); }},
      {"adamw_update", [&] { ops::adamw_update(ctx, adam, t, {}, t, t, t, t, none); }},
      {"lamb_moments", [&] { ops::lamb_moments(ctx, adam, t, {}, t, none, t, t, t, t); }},
      {"lamb_update", [&] { ops::lamb_update(ctx, adam, t, {}, t, t, t, t, none); }},
      {"lars_update", [&] { ops::lars_update(ctx, lars, t, {}, t, t, t, t, none); }},
      {"conv2d_forward", [&] { ops::conv2d_forward(ctx, conv, t, t, t); }},
      {"conv2d_backward_data", [&] { ops::conv2d_backward_data(ctx, conv, t, t, t); }},
      {"conv2d_backward_weights", [&] { ops::conv2d_backward_weights(ctx, conv, t, t, t); }},
      {"batchnorm_train_forward",
       [&] { ops::batchnorm_train_forward(ctx, t, t, t, 1e-5f, false, t, t, t); }},
      {"batchnorm_eval_forward",
       [&] { ops::batchnorm_eval_forward(ctx, t, t, t, t, t, 1e-5f, false, t); }},
      {"batchnorm_backward",
       [&] { ops::batchnorm_backward(ctx, t, t, t, t, t, t, 1e-5f, false, true, t, t, t); }},
      {"batchnorm_channel_sums", [&] { ops::batchnorm_channel_sums(ctx, t, t); }},
      {"batchnorm_update_running",
       [&] { ops::batchnorm_update_running(ctx, t, t, 2, 0.1f, t, t, t); }},
      {"maxpool_forward", [&] { ops::maxpool_forward(ctx, pool, t, t, t); }},
      {"maxpool_backward", [&] { ops::maxpool_backward(ctx, pool, t, t, t); }},
      {"global_avgpool_forward", [&] { ops::global_avgpool_forward(ctx, t, t); }},
      {"relu_backward", [&] { ops::relu_backward(ctx, t, t, t); }},
      {"add_layernorm_forward", [&] { ops::add_layernorm_forward(ctx, t, t, t, t, 1e-5f, t, t, t, t); }},
      {"residual_add", [&] { ops::residual_add(ctx, t, t); }},
  };
  for (const auto& [op, call] : calls) {
    try {
      call();
      ADD_FAILURE() << op << ": no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(op), std::string::npos) << what;
      EXPECT_EQ(what.find("not implemented"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace kiln
