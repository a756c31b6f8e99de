// NCCL on one GPU: a one-rank communicator over this single process, each collective queued on
// the device's op stream and read back through an op context on it. One rank leaves every input
// as it was, so what this checks is that NCCL opens, initialises and runs each call without error
// and without touching the data. Skipped without NCCL built in or without a CUDA device;
// tools/gpu_check.sh runs it among the unit tests on a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/dist/world.h"
#include "tests/testing/cuda_device.h"
#ifdef KILN_HAVE_NCCL
#include "kiln/dist/nccl/nccl_communicator.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_HAVE_NCCL
std::vector<float> on_host(Context& ctx, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  Tensor h = Tensor::view(v.data(), t.shape);
  ops::copy(ctx, t, h);
  return v;
}
#endif

TEST(NcclOneRank, EveryCollectiveOfOneRankLeavesItsInput) {
#ifndef KILN_HAVE_NCCL
  GTEST_SKIP() << "built without NCCL";
#else
  if (!testing::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  Context ctx = device_context(gpu);
  const std::unique_ptr<dist::Communicator> comm = dist::nccl_communicator(dist::world(), gpu);
  ASSERT_EQ(comm->size(), 1);
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 7.0f, 0.125f};
  const Shape shape{int64_t(values.size())};
  Tensor t = Tensor::empty(shape, DType::f32, gpu), out = Tensor::empty(shape, DType::f32, gpu);
  ops::copy(ctx, Tensor::view(values.data(), shape), t);

  comm->all_reduce_sum(t);
  EXPECT_EQ(on_host(ctx, t), values) << "all_reduce_sum";
  comm->broadcast(t, 0);
  EXPECT_EQ(on_host(ctx, t), values) << "broadcast";
  ops::fill(ctx, out, 0.0f);
  comm->all_gather(t, out);
  EXPECT_EQ(on_host(ctx, out), values) << "all_gather";
  ops::fill(ctx, out, 0.0f);
  comm->reduce_scatter_sum(t, out);
  EXPECT_EQ(on_host(ctx, out), values) << "reduce_scatter_sum";
  comm->iall_reduce_sum(t)->wait();
  EXPECT_EQ(on_host(ctx, t), values) << "iall_reduce_sum";

  std::vector<float> host = values;  // a host tensor goes to the host communicator
  Tensor host_t = Tensor::view(host.data(), shape);
  comm->all_reduce_sum(host_t);
  EXPECT_EQ(host, values) << "all_reduce_sum of a host tensor";
#endif
}

}  // namespace
}  // namespace kiln
