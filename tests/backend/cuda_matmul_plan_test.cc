// How the CUDA matmul splits MatView batches into cuBLASLt calls (backend/cuda/matmul_plan.h):
// every matrix the view addresses is visited once, at the address the view gives it, by strided
// calls or from the pointer tables; and the key its cached plans are found by tells apart every
// product a plan depends on.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/grid.h"
#include "kiln/backend/cuda/matmul_plan.h"

namespace kiln {
namespace {

using namespace ops::cuda;

// Element offsets of the first element of every matrix the calls visit, in call order.
std::vector<int64_t> visited(const ops::MatView& v, Batching mode) {
  const Batch inner = inner_batch(v, mode);
  const int64_t outer = calls_for(v, mode);
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
  EXPECT_EQ(visited(v, Batching::by_outer), expected(v));
  EXPECT_EQ(inner_batch(v, Batching::by_outer).count, heads);
}

// The tables of a heads product (q k^T into per-head scores) hold every matrix's address, in the
// order cuBLASLt's pointer-array batch reads them, over the launch's whole grid.
TEST(CudaMatmulPlan, PointerTablesAddressEveryMatrixOfEachView) {
  const int64_t B = 3, S = 5, heads = 4, d = 8;
  const Tensor q = Tensor::zeros({B * S, heads * d}, DType::bf16), k = Tensor::zeros({B * S, heads * d}, DType::bf16);
  const Tensor scores = Tensor::zeros({B, heads, S, S});
  const ops::MatView a = ops::heads_view(q, B, S, heads), b = ops::heads_view(k, B, S, heads, true);
  const ops::MatView c = ops::per_head(scores);
  ASSERT_EQ(preferred_batching(a, b, c, {}), Batching::by_table);
  const int64_t count = B * heads;
  std::vector<uintptr_t> table(size_t(3 * count), 0);
  const std::array<const void*, 3> first = {k.data, q.data, scores.data};  // cuBLASLt's A, B, C
  const PointerTableBody body = pointer_tables({&b, &a, &c}, first, table.data());
  ops::cuda::run_on_host(grid_for(3 * count, kH200Multiprocessors), 3 * count, body);
  const ops::MatView* views[3] = {&b, &a, &c};
  for (size_t v = 0; v < 3; ++v) {
    const std::vector<int64_t> offsets = expected(*views[v]);
    const auto size = uintptr_t(dtype_size(views[v]->t.dtype));
    for (size_t i = 0; i < size_t(count); ++i)
      EXPECT_EQ(table[v * size_t(count) + i], reinterpret_cast<uintptr_t>(first[v]) + uintptr_t(offsets[i]) * size)
          << "view " << v << " matrix " << i;
  }
}

// Pointer tables only for a plain product that does not merge: an epilogue (its vector, its
// activation) or an accumulating beta keeps the strided calls per outer batch.
TEST(CudaMatmulPlan, PointerTablesOnlyForPlainUnmergedProducts) {
  const int64_t B = 2, S = 4, heads = 2;
  const Tensor x = Tensor::zeros({B * S, heads * 8}), y = Tensor::zeros({B, heads, S, S});
  const ops::MatView a = ops::heads_view(x, B, S, heads), b = ops::heads_view(x, B, S, heads, true);
  const ops::MatView c = ops::per_head(y);
  EXPECT_EQ(preferred_batching(a, b, c, {}), Batching::by_table);
  EXPECT_EQ(preferred_batching(ops::per_head(y), ops::per_head(y), c, {}), Batching::merged);
  const Tensor bias = Tensor::zeros({S});
  ops::MatmulOpts with_bias, accumulate, relu;
  with_bias.bias = &bias;
  accumulate.beta = 1.0f;
  relu.act = ops::Activation::relu;
  for (const ops::MatmulOpts* o : {&with_bias, &accumulate, &relu})
    EXPECT_EQ(preferred_batching(a, b, c, *o), Batching::by_outer);
  EXPECT_EQ(calls_for(c, Batching::by_outer), B);
  EXPECT_EQ(calls_for(c, Batching::by_table), 1);
  EXPECT_EQ(inner_batch(c, Batching::by_table).count, B * heads);
}

// A table's matrices are as aligned as the first and the batch strides in bytes allow.
TEST(CudaMatmulPlan, AllMatricesAlignmentCountsBothBatchStrides) {
  alignas(256) static uint16_t storage[4096];
  const Tensor x = Tensor::view(storage, {4096}, DType::bf16);
  ops::MatView v = ops::mat(x.reshape({64, 64}));
  v.rows = 8, v.batch[0] = 2, v.batch[1] = 4;
  v.batch_stride[0] = 2048, v.batch_stride[1] = 512;  // 4096 and 1024 bytes
  EXPECT_EQ(all_matrices_alignment(storage, v), 256u);
  v.batch_stride[1] = 24;  // 48 bytes
  EXPECT_EQ(all_matrices_alignment(storage, v), 16u);
  v.batch_stride[1] = 512;
  EXPECT_EQ(all_matrices_alignment(storage + 4, v), 8u);
}

TEST(CudaMatmulPlan, DenseBatchesMergeIntoOneCall) {
  const Tensor x = Tensor::zeros({2, 3, 4, 5});
  const ops::MatView v = ops::per_head(x);
  ASSERT_TRUE(mergeable(v));
  EXPECT_EQ(visited(v, Batching::merged), expected(v));
  EXPECT_EQ(inner_batch(v, Batching::merged).count, 6);
  EXPECT_EQ(visited(v, Batching::by_outer), expected(v));
  ops::MatView one_level = v;  // batch {2, 1}
  one_level.batch[1] = 1;
  EXPECT_TRUE(mergeable(one_level));
  EXPECT_EQ(visited(one_level, Batching::merged), expected(one_level));
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

TEST(CudaMatmulPlan, KeySeparatesEverythingAPlanDependsOn) {
  const Tensor x = Tensor::zeros({4, 6}, DType::bf16), w = Tensor::zeros({5, 6}, DType::bf16);
  const Tensor y = Tensor::zeros({4, 5}), bias = Tensor::zeros({5});
  const ops::MatView a = ops::mat(x), b = ops::mat(w, true), c = ops::mat(y);
  const ops::MatmulOpts opts;
  const std::array<uint32_t, 4> align = {256, 256, 256, 0};
  const PlanKey base = plan_key(0, a, b, c, opts, align);
  std::vector<PlanKey> changed;
  for (int which = 0; which < 3; ++which) {  // every field of each view
    for (int field = 0; field < 9; ++field) {
      ops::MatView v[3] = {a, b, c};
      ops::MatView& m = v[which];
      int64_t* fields[] = {&m.rows, &m.cols, &m.ld, nullptr, &m.batch[0], &m.batch[1], &m.batch_stride[0],
                           &m.batch_stride[1], nullptr};
      if (field == 3) m.trans = !m.trans;
      else if (field == 8) m.t = Tensor::zeros({1}, m.t.dtype == DType::f32 ? DType::f16 : DType::f32);
      else *fields[field] += 1;
      changed.push_back(plan_key(0, v[0], v[1], v[2], opts, align));
    }
  }
  ops::MatmulOpts with_bias, f16_bias, relu, accumulate, bias_grad, strided_bias;
  const Tensor bias16 = Tensor::zeros({5}, DType::f16);
  Tensor db = Tensor::zeros({4});
  with_bias.bias = &bias;
  f16_bias.bias = &bias16;
  relu.act = ops::Activation::relu;
  accumulate.beta = 1.0f;
  bias_grad.bias_grad = &db;
  strided_bias.bias = &bias;
  strided_bias.bias_batch_stride = 16;
  for (const ops::MatmulOpts* o : {&with_bias, &f16_bias, &relu, &accumulate, &bias_grad, &strided_bias})
    changed.push_back(plan_key(0, a, b, c, *o, align));
  changed.push_back(plan_key(1, a, b, c, opts, align));
  for (int i = 0; i < 4; ++i) {
    std::array<uint32_t, 4> less = align;
    less[size_t(i)] = 16;
    changed.push_back(plan_key(0, a, b, c, opts, less));
  }
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_FALSE(changed[i] == base) << "change " << i;
    for (size_t j = 0; j < i; ++j) EXPECT_FALSE(changed[i] == changed[j]) << "changes " << i << " and " << j;
  }
}

// kiln's a is cuBLASLt's B: a weight gradient's dy (a, read transposed) is reduced by BGRADB.
TEST(CudaMatmulPlan, EpilogueFollowsTheOptions) {
  const Tensor bias = Tensor::zeros({5});
  Tensor db = Tensor::zeros({4});
  ops::MatmulOpts o;
  EXPECT_EQ(epilogue_for(o), Epilogue::none);
  o.act = ops::Activation::gelu_erf;  // a kernel after the product
  EXPECT_EQ(epilogue_for(o), Epilogue::none);
  o.act = ops::Activation::gelu_tanh;
  EXPECT_EQ(epilogue_for(o), Epilogue::gelu);
  o.bias = &bias;
  EXPECT_EQ(epilogue_for(o), Epilogue::gelu_bias);
  o.act = ops::Activation::relu;
  EXPECT_EQ(epilogue_for(o), Epilogue::relu_bias);
  o.act = ops::Activation::none;
  EXPECT_EQ(epilogue_for(o), Epilogue::bias);
  ops::MatmulOpts g;
  g.bias_grad = &db;
  g.beta = 1.0f;
  EXPECT_EQ(epilogue_for(g), Epilogue::bias_grad_b);
}

// A bias at an odd offset of the flat parameter buffer gets a plan of its own; batched biases
// count every batch's start.
TEST(CudaMatmulPlan, VectorAlignmentIsTheEpilogueVectorsAtEveryCall) {
  alignas(256) static float storage[64];
  const Tensor bias = Tensor::view(storage, {8}), odd_bias = Tensor::view(storage + 1, {8});
  const Tensor batched = Tensor::view(storage, {40});
  Tensor db = Tensor::view(storage + 4, {8});
  ops::MatmulOpts none, plain, odd, strided, grad;
  plain.bias = &bias;
  odd.bias = &odd_bias;
  strided.bias = &batched;
  strided.bias_batch_stride = 10;
  grad.bias_grad = &db;
  EXPECT_EQ(vector_alignment(none), 0u);
  EXPECT_EQ(vector_alignment(plain), 256u);
  EXPECT_EQ(vector_alignment(odd), 4u);
  EXPECT_EQ(vector_alignment(strided), 8u);
  EXPECT_EQ(vector_alignment(grad), 16u);
}

TEST(CudaMatmulPlan, KeyIgnoresPointersAndAlpha) {
  const Tensor x1 = Tensor::zeros({4, 6}), x2 = Tensor::zeros({4, 6}), w = Tensor::zeros({6, 5});
  const Tensor y1 = Tensor::zeros({4, 5}), y2 = Tensor::zeros({4, 5});
  const Tensor bias1 = Tensor::zeros({5}), bias2 = Tensor::zeros({5});
  ops::MatmulOpts o1, o2;
  o1.bias = &bias1;
  o2.bias = &bias2;
  o2.alpha = 1.0f;
  const std::array<uint32_t, 4> align = {64, 64, 64, 64};
  const PlanKey k1 = plan_key(0, ops::mat(x1), ops::mat(w), ops::mat(y1), o1, align);
  const PlanKey k2 = plan_key(0, ops::mat(x2), ops::mat(w), ops::mat(y2), o2, align);
  EXPECT_TRUE(k1 == k2);
  EXPECT_EQ(PlanKeyHash{}(k1), PlanKeyHash{}(k2));
  Tensor db1 = Tensor::zeros({4}), db2 = Tensor::zeros({4});
  ops::MatmulOpts g1, g2;
  g1.bias_grad = &db1;
  g2.bias_grad = &db2;
  EXPECT_TRUE(plan_key(0, ops::mat(x1), ops::mat(w), ops::mat(y1), g1, align) ==
              plan_key(0, ops::mat(x1), ops::mat(w), ops::mat(y1), g2, align));
  ops::MatmulOpts scaled;
  scaled.alpha = 0.5f;  // passed with the call
  EXPECT_TRUE(plan_key(0, ops::mat(x1), ops::mat(w), ops::mat(y1), scaled, align) ==
              plan_key(0, ops::mat(x1), ops::mat(w), ops::mat(y1), {}, align));
}

}  // namespace
}  // namespace kiln
