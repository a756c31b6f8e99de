#include "kiln/nn/grad_loan.h"

#include <gtest/gtest.h>

#include "kiln/core/error.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {
namespace {

// Three "layers" of 64, 32 and 48 elements after an embedding of 16: layer n may take the
// gradients of the layers below it, in order, 64-byte aligned, never twice; layer 0 and other
// devices get nothing.
TEST(GradLoan, LendsEachLayerTheGradientsOfTheLayersBelowIt) {
  ParamStore store;
  store.add("embedding", {16}, true);
  store.add("layer0", {64}, true);
  store.add("layer1", {32}, true);
  store.add("layer2", {48}, true);
  store.allocate();
  GradLoan loan(store, {16, 80, 112});
  const auto* grads = static_cast<const std::byte*>(store.grads.data);
  EXPECT_FALSE(loan.take(0, 4, Device::cpu()).defined());
  EXPECT_FALSE(loan.take(1, 260, Device::cpu()).defined());  // layer 0 has 256 bytes
  EXPECT_FALSE(loan.take(1, 4, Device::sim()).defined());
  const Tensor a = loan.take(1, 100, Device::cpu());
  ASSERT_TRUE(a.defined());
  EXPECT_EQ(static_cast<const std::byte*>(a.data), grads + 64);
  EXPECT_EQ(a.storage, store.grads.storage);  // keeps the gradients alive
  EXPECT_FALSE(loan.take(1, 160, Device::cpu()).defined());  // from 164 -> 192 aligned: 352 > 320
  const Tensor b = loan.take(2, 160, Device::cpu());         // layer 1's gradients end at byte 448
  ASSERT_TRUE(b.defined());
  EXPECT_EQ(static_cast<const std::byte*>(b.data), grads + 192);
  EXPECT_EQ(loan.bytes_lent(), size_t(352 - 64));
}

// A Buffer allocating inside a LoanScope takes lent memory; outside it, or with no loan, its own.
// A parameter that holds a contribution where memory is lent fails check_unwritten().
TEST(GradLoan, BuffersInALoanScopeTakeLentMemoryAndContributionsAreRefused) {
  ParamStore store;
  store.add("layer0", {64}, true);
  const Param l1 = store.add("layer1", {64}, true);
  store.allocate();
  GradLoan loan(store, {0, 64});
  Buffer lent, own, unlent;
  {
    LoanScope scope(&loan, 1);
    EXPECT_THROW(LoanScope(&loan, 1), Error);
    EXPECT_EQ(lent.get(cpu_context(), {8, 4}).data, store.grads.data);
  }
  EXPECT_NE(own.get(cpu_context(), {8, 4}).data, store.grads.data);
  {
    LoanScope scope(nullptr, 1);
    EXPECT_FALSE(unlent.get(cpu_context(), {2}).storage == store.grads.storage);
  }
  EXPECT_THROW(loan.check_unwritten(), Error);  // zero_grad(): every gradient counts as written
  store.clear_grads();
  (void)l1.grad_for_write();  // layer 1: nothing lent there
  EXPECT_NO_THROW(loan.check_unwritten());
  (void)Param{&store, 0}.grad_for_write();
  EXPECT_THROW(loan.check_unwritten(), Error);
}

}  // namespace
}  // namespace kiln::nn
