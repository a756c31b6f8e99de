// How the CUDA weight gradient runs per dtype (backend/cuda/conv_plan.h), and its kernel body
// (conv_bodies.h) run on the CPU over its launch's grid: cuDNN's (K, R, S, C/groups) filter
// gradient, widened and transposed into kiln's f32 (K, C/groups, R, S), written or added.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/backend/cuda/conv_bodies.h"
#include "kiln/backend/cuda/conv_plan.h"
#include "cuda_bodies.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;

TEST(CudaConvPlan, Bf16WeightGradientsRunInBf16UnlessCudnnHasNoAlgorithm) {
  const WgradPath native = wgrad_path(DType::bf16, false);
  EXPECT_EQ(native.descriptors, DType::bf16);
  EXPECT_FALSE(native.f32_copies);
  const WgradPath fallback = wgrad_path(DType::bf16, true);
  EXPECT_EQ(fallback.descriptors, DType::f32);
  EXPECT_TRUE(fallback.f32_copies && fallback.tf32_exact);
  // The two paths' algorithms are cached under different keys.
  EXPECT_NE(std::string(native.label), std::string(fallback.label));
  for (bool failed : {false, true}) {
    const WgradPath f16 = wgrad_path(DType::f16, failed);  // f16's range: always the f32 copies
    EXPECT_TRUE(f16.descriptors == DType::f32 && f16.f32_copies && f16.tf32_exact);
    const WgradPath f32 = wgrad_path(DType::f32, failed);
    EXPECT_TRUE(f32.descriptors == DType::f32 && !f32.f32_copies && !f32.tf32_exact);
  }
}

TEST(CudaBodies, WgradToKcrsTransposesAndWidensIntoTheF32Gradient) {
  const int64_t K = 5, Cg = 3, R = 3, S = 2, RS = R * S, n = K * Cg * RS;
  const std::vector<bf16_t> krsc = stored<bf16_t>(testing::random_normal(n, 60));
  const std::vector<float> before = testing::random_normal(n, 61);
  for (bool accumulate : {false, true}) {
    std::vector<float> dw = before;
    run_all(n, WgradToKcrsBody{ptr(krsc), dw.data(), Cg, RS, accumulate});
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t rs = 0; rs < RS; ++rs) {
          const size_t i = size_t((k * Cg + c) * RS + rs);
          const float v = load(krsc[size_t((k * RS + rs) * Cg + c)]);
          EXPECT_EQ(dw[i], accumulate ? before[i] + v : v) << k << " " << c << " " << rs;
        }
  }
}

}  // namespace
}  // namespace kiln
