// Backends and devices (backend/devices.h) and what a CUDA request does where no GPU is usable:
// a one-line kiln::Error naming the device or op, never a crash. On a machine with a GPU the
// no-device tests skip (tools/gpu_check.sh runs the parity suite there).
#include <gtest/gtest.h>

#include <string>

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/core/error.h"

namespace kiln {
namespace {

bool cuda_device_present() {
  for (const std::string& line : device_lines())
    if (line.starts_with("cuda:0:")) return true;
  return false;
}

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
  ASSERT_FALSE(device_lines().empty());
  EXPECT_EQ(device_lines()[0], "cpu");
  const bool cuda_built = compiled_backends().find("cuda") != std::string::npos;
  EXPECT_EQ(device_lines().size() > 1, cuda_built);
}

TEST(Devices, ParsesDeviceNames) {
  EXPECT_EQ(parse_device("cpu", "--device"), Device::cpu());
  EXPECT_EQ(parse_device("cuda", "--device"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:3", "--device"), Device::cuda(3));
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

TEST(Devices, OpsWithoutACudaImplementationSaySo) {
  if (compiled_backends().find("cuda") == std::string::npos) GTEST_SKIP() << "built without CUDA";
  Context ctx{Device::cuda(0)};
  Tensor t = Tensor::zeros({2, 2});
  const RngStream rng{42, rng_stream(RngPurpose::dropout, 0, 0)};
  expect_one_line_error([&] { ops::dropout_forward(ctx, t, 0.1f, rng, 0, 1, t, 2); },
                        {"dropout_forward with an element offset", "cuda:0", "not implemented"});
}

}  // namespace
}  // namespace kiln
