// How the CUDA matmul splits MatView batches into cuBLASLt calls (backend/cuda/matmul_plan.h):
// every matrix the view addresses is visited once, at the address the view gives it.
#include <gtest/gtest.h>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/matmul_plan.h"

namespace kiln {
namespace {

using namespace ops::cuda;

// Element offsets of the first element of every matrix the calls visit, in call order.
std::vector<int64_t> visited(const ops::MatView& v, bool merged) {
  const Batch inner = inner_batch(v, merged);
  const int64_t outer = merged ? 1 : v.batch[0];
  std::vector<int64_t> out;
  for (int64_t b0 = 0; b0 < outer; ++b0)
    for (int64_t i = 0; i < inner.count; ++i)
      out.push_back(v.offset + b0 * v.batch_stride[0] + i * inner.stride);
  return out;
}

std::vector<int64_t> expected(const ops::MatView& v) {
  std::vector<int64_t> out;
  for (int64_t b0 = 0; b0 < v.batch[0]; ++b0)
    for (int64_t b1 = 0; b1 < v.batch[1]; ++b1)
      out.push_back(v.offset + b0 * v.batch_stride[0] + b1 * v.batch_stride[1]);
  return out;
}

TEST(CudaMatmulPlan, HeadsViewsRunOneCallPerOuterBatch) {
  const int64_t B = 3, S = 5, heads = 4, d = 8;
  const Tensor x = Tensor::zeros({B * S, heads * d});
  const ops::MatView v = ops::heads_view(x, B, S, heads);
  EXPECT_FALSE(mergeable(v));  // batch b's stride S*H is not heads * d
  EXPECT_EQ(visited(v, false), expected(v));
  EXPECT_EQ(inner_batch(v, false).count, heads);
}

TEST(CudaMatmulPlan, DenseBatchesMergeIntoOneCall) {
  const Tensor x = Tensor::zeros({2, 3, 4, 5});
  const ops::MatView v = ops::per_head(x);
  ASSERT_TRUE(mergeable(v));
  EXPECT_EQ(visited(v, true), expected(v));
  EXPECT_EQ(inner_batch(v, true).count, 6);
  EXPECT_EQ(visited(v, false), expected(v));
  ops::MatView one_level = v;  // batch {2, 1}
  one_level.batch[1] = 1;
  EXPECT_TRUE(mergeable(one_level));
  EXPECT_EQ(visited(one_level, true), expected(one_level));
}

TEST(CudaMatmulPlan, CoversTensorOnlyForDenseWholeViews) {
  const Tensor x = Tensor::zeros({6, 7});
  EXPECT_TRUE(covers_tensor(ops::mat(x)));
  EXPECT_FALSE(covers_tensor(ops::mat(x, true)));
  ops::MatView part = ops::mat(x);
  part.rows = 3;
  EXPECT_FALSE(covers_tensor(part));
  EXPECT_TRUE(covers_tensor(ops::per_head(Tensor::zeros({2, 3, 4, 5}))));
  EXPECT_FALSE(covers_tensor(ops::heads_view(Tensor::zeros({10, 8}), 2, 5, 2)));
}

}  // namespace
}  // namespace kiln
