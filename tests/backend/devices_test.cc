// Backends and devices (backend/devices.h) and what a CUDA request does where no GPU is usable:
// a one-line kiln::Error naming the device or op, never a crash. On a machine with a GPU the
// no-device tests skip (tools/gpu_check.sh runs the parity suite there).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>
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

// A value for each parameter type of an op: a host tensor (2, 2) for a tensor (and a view of it
// for a matrix operand), a default-constructed value for the rest.
template <typename T>
T& sample_arg() {
  static T value{};
  return value;
}
template <>
Tensor& sample_arg<Tensor>() {
  static Tensor host = Tensor::zeros({2, 2});
  return host;
}
template <>
ops::MatView& sample_arg<ops::MatView>() {
  static ops::MatView view = ops::mat(sample_arg<Tensor>());
  return view;
}

// op(ctx, a sample of each parameter).
template <typename... Params>
void call_with_samples(Context& ctx, void (*op)(Context&, Params...)) {
  op(ctx, sample_arg<std::remove_cvref_t<Params>>()...);
}

// Every op of the list (backend/ops.def) reaches the CUDA backend on a CUDA context: with host
// tensors each one stops at the device check (naming the op), never at "not implemented" or at
// "no backend". (A CUDA build without an op's CUDA body does not link: the dispatch calls it.)
TEST(Devices, EveryOpHasACudaImplementation) {
  if (compiled_backends().find("cuda") == std::string::npos) GTEST_SKIP() << "built without CUDA";
  Context ctx{Device::cuda(0)};
  const std::vector<std::pair<const char*, std::function<void()>>> calls = {
#define KILN_OP(name, params, args) {#name, [&] { call_with_samples(ctx, &ops::name); }},
#include "kiln/backend/ops.def"
  };
  EXPECT_GE(calls.size(), 58u);
  for (const auto& [op, call] : calls) {
    try {
      call();
      ADD_FAILURE() << op << ": no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("op ") + op + ":"), std::string::npos) << what;
      EXPECT_EQ(what.find("not implemented"), std::string::npos) << what;
      EXPECT_EQ(what.find("no backend"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace kiln
