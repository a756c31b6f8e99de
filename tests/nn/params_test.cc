#include "kiln/nn/params.h"

#include <gtest/gtest.h>

#include "kiln/core/error.h"

namespace kiln {
namespace {

TEST(ParamStore, APartKnowsWhereItSitsInTheWholeParameter) {
  ParamStore store;
  store.add("whole", {3, 4}, true);
  const Param part = store.add_part("split", {8, 5}, true, 0, 4, 4);  // rows [4, 8) of (8, 5)
  store.allocate();
  EXPECT_EQ(store.specs()[0].part_dim, -1);
  EXPECT_EQ(store.specs()[0].full_shape, (Shape{3, 4}));
  EXPECT_EQ(part.spec().shape, (Shape{4, 5}));
  EXPECT_EQ(part.spec().full_shape, (Shape{8, 5}));
  EXPECT_EQ(part.spec().part_dim, 0);
  EXPECT_EQ(part.spec().part_start, 4);
  EXPECT_EQ(part.numel(), 20);
}

TEST(ParamStore, APartOutsideItsParameterIsRefused) {
  ParamStore store;
  EXPECT_THROW(store.add_part("split", {8, 5}, true, 1, 3, 3), Error);  // columns [3, 6) of 5
  EXPECT_THROW(store.add_part("split", {8, 5}, true, 2, 0, 1), Error);  // no dimension 2
}

// After clear_grads() the buffer keeps last step's values: the first contribution to a parameter
// is told to write, later ones to add; grad() zero-fills a parameter nothing wrote, and
// settle_grads() the ones in its range that nothing wrote, leaving written ones alone.
TEST(ParamStore, ClearedGradientsAreWrittenByTheFirstContributionAndSettledToZero) {
  ParamStore store;
  const Param written = store.add("written", {2, 3}, true);
  const Param added = store.add("added", {4}, false);
  const Param untouched = store.add("untouched", {5}, false);
  const Param outside = store.add("outside", {3}, false);
  store.allocate();
  for (float& g : store.host_grads()) g = 7.0f;  // last step's gradients
  store.clear_grads();

  const Param::GradTarget first = written.grad_for_write();
  EXPECT_FALSE(first.accumulate);
  EXPECT_EQ(first.grad.shape, (Shape{2, 3}));
  EXPECT_EQ(first.grad.ptr<float>(), written.g());
  EXPECT_TRUE(written.grad_for_write().accumulate);
  for (int i = 0; i < 6; ++i) written.g()[i] = 1.0f;  // what the first contribution wrote

  const Tensor to_add = added.grad();  // an op that only adds
  for (int i = 0; i < 4; ++i) EXPECT_EQ(to_add.ptr<float>()[i], 0.0f);
  EXPECT_TRUE(added.grad_for_write().accumulate);

  store.settle_grads(0, outside.spec().offset);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(written.g()[i], 1.0f);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(untouched.g()[i], 0.0f);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outside.g()[i], 7.0f) << "outside the settled range";
  EXPECT_FALSE(outside.grad_for_write().accumulate);

  store.zero_grad();  // zeroes everything and counts as written
  EXPECT_TRUE(untouched.grad_for_write().accumulate);
  for (float g : store.host_grads()) EXPECT_EQ(g, 0.0f);
}

// bf16 on the host: split_master() keeps the master weights as the bf16 copy and their low halves
// (the f32 buffer goes), and every reader still sees the f32 weights exactly.
TEST(ParamStore, SplitMasterWeightsReadBackExactly) {
  ParamStore store;
  const Param matrix = store.add("matrix", {3, 5}, true);
  const Param bias = store.add("bias", {5}, false);
  store.set_compute_dtype(DType::bf16);
  store.allocate();
  for (size_t i = 0; i < store.host_values().size(); ++i)
    store.host_values()[i] = 1.0f + float(i) * 0.001953125f + 1e-7f * float(i % 7);  // low bits set
  store.refresh_compute();
  const std::vector<float> before = store.values_vector();
  store.split_master();
  ASSERT_TRUE(store.split());
  EXPECT_FALSE(store.values.defined());
  EXPECT_EQ(store.master().dtype, DType::u16);
  EXPECT_EQ(store.values_vector(), before);
  const Tensor b = bias.value();  // joined for ops that read f32 parameters
  for (int64_t i = 0; i < bias.numel(); ++i) EXPECT_EQ(b.ptr<float>()[i], before[size_t(bias.spec().offset + i)]);
  Tensor joined = Tensor::empty({store.padded_size()});
  store.join_master(joined);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(joined.ptr<float>()[i], before[i]);
  try {
    (void)matrix.w();
    ADD_FAILURE() << "host access to split f32 weights must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("split"), std::string::npos) << e.what();
  }
  // Gradients are zero again after the split staged the low halves in their buffer.
  for (float g : store.host_grads()) EXPECT_EQ(g, 0.0f);
}

// f32 and f16 compute copies keep the f32 master weights.
TEST(ParamStore, OnlyABf16CopySplitsTheMasterWeights) {
  for (DType dtype : {DType::f32, DType::f16}) {
    ParamStore store;
    store.add("w", {4}, true);
    store.set_compute_dtype(dtype);
    store.allocate();
    store.split_master();
    EXPECT_FALSE(store.split()) << dtype_name(dtype);
    EXPECT_TRUE(store.values.defined()) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace kiln
