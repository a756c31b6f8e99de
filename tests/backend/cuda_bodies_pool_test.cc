// The CUDA backend's pooling bodies (pool_bodies.h) run on the CPU over the launches' grids,
// against the CPU backend bit for bit: the same first maximum, and gradients and averages summed
// in f32 in the same order.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/pool_bodies.h"
#include "kiln/backend/cuda/grid.h"
#include "cuda_bodies.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::random_normal;

template <typename T>
bool same_bits(const std::vector<T>& got, const Tensor& want) {
  return got.size() * sizeof(T) == want.nbytes() &&
         std::memcmp(got.data(), want.data, want.nbytes()) == 0;
}

TEST(CudaBodies, MaxPoolForwardAndBackwardAreTheCpuBackendsBitForBit) {
  struct Case {
    int64_t N, H, W, C, window, stride, pad;
  };
  // ResNet's 3x3 stride-2 pad-1 stem pool, overlapping and non-overlapping windows, a tiny input.
  for (const Case& k : {Case{2, 9, 8, 5, 3, 2, 1}, Case{1, 6, 7, 3, 2, 2, 0}, Case{3, 5, 5, 2, 3, 1, 1},
                        Case{1, 1, 1, 4, 1, 1, 0}})
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      const DType dt = dtype_of<T>();
      ops::PoolShape s;
      s.N = k.N, s.H = k.H, s.W = k.W, s.C = k.C, s.R = s.S = k.window;
      s.stride_h = s.stride_w = k.stride, s.pad_h = s.pad_w = k.pad;
      const PoolGeometry g{s.N, s.H, s.W, s.C, s.R, s.S, s.stride_h, s.stride_w,
                           s.pad_h, s.pad_w, s.P(), s.Q()};
      const Shape xs{s.N, s.H, s.W, s.C}, ys{s.N, s.P(), s.Q(), s.C};
      std::vector<float> xv = random_normal(shape_numel(xs), 32);
      for (size_t i = 0; i < xv.size(); i += 7) xv[i] = xv[i / 2];  // ties: the first one wins
      const std::vector<T> x = stored<T>(xv), dy = stored<T>(random_normal(shape_numel(ys), 33));
      std::vector<T> y(size_t(shape_numel(ys))), dx(x.size());
      std::vector<int32_t> argmax(y.size());
      run_all(shape_numel(ys), MaxPoolBody{g, ptr(x), ptr(y), argmax.data()});
      run_all(shape_numel(xs), MaxPoolBackwardBody{g, ptr(dy), ptr(dx), argmax.data()});

      Tensor want_y = Tensor::empty(ys, dt), want_arg = Tensor::empty(ys, DType::i32);
      Tensor want_dx = Tensor::empty(xs, dt);
      const Tensor xt = Tensor::view(const_cast<T*>(x.data()), xs, dt);
      const Tensor dyt = Tensor::view(const_cast<T*>(dy.data()), ys, dt);
      ops::maxpool_forward(cpu_context(), s, xt, want_y, want_arg);
      ops::maxpool_backward(cpu_context(), s, dyt, want_arg, want_dx);
      EXPECT_TRUE(same_bits(y, want_y)) << shape_str(xs) << " " << dtype_name(dt);
      EXPECT_TRUE(same_bits(argmax, want_arg)) << shape_str(xs) << " " << dtype_name(dt);
      EXPECT_TRUE(same_bits(dx, want_dx)) << shape_str(xs) << " " << dtype_name(dt);
    });
}

TEST(CudaBodies, GlobalAvgPoolIsTheCpuBackendsBitForBit) {
  const int64_t N = 3, H = 7, W = 5, C = 33, HW = H * W;
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const DType dt = dtype_of<T>();
    const std::vector<T> x = stored<T>(random_normal(N * HW * C, 34));
    const std::vector<float> dy = random_normal(N * C, 35);
    std::vector<float> y(size_t(N * C));
    std::vector<T> dx(x.size());
    run_all(N * C, GlobalAvgPoolBody{ptr(x), ptr(y), HW, C});
    run_all(N * HW * C, GlobalAvgPoolBackwardBody{ptr(dy), ptr(dx), HW, C});
    Tensor want_y = Tensor::empty({N, C}), want_dx = Tensor::empty({N, H, W, C}, dt);
    ops::global_avgpool_forward(cpu_context(), Tensor::view(const_cast<T*>(x.data()), {N, H, W, C}, dt),
                                want_y);
    ops::global_avgpool_backward(cpu_context(), Tensor::view(const_cast<float*>(dy.data()), {N, C}),
                                 want_dx);
    EXPECT_TRUE(same_bits(y, want_y)) << dtype_name(dt);
    EXPECT_TRUE(same_bits(dx, want_dx)) << dtype_name(dt);
  });
}

}  // namespace
}  // namespace kiln
