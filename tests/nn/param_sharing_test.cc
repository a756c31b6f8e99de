// ParamStore::share_existing: a name registered again returns the parameter registered first
// (pipeline slot instances share weights and gradients), and only while it is on, with the same
// shape and decay.
#include <gtest/gtest.h>

#include "kiln/core/error.h"
#include "kiln/nn/params.h"

namespace kiln {
namespace {

TEST(ParamSharing, ASecondRegistrationReturnsTheFirstParameterWhileSharing) {
  ParamStore store;
  const Param a = store.add("w", {2, 3}, true);
  EXPECT_THROW(store.add("w", {2, 3}, true), Error);
  store.share_existing(true);
  const Param again = store.add("w", {2, 3}, true);
  EXPECT_EQ(again.id, a.id);
  EXPECT_THROW(store.add("w", {3, 2}, true), Error);   // another shape
  EXPECT_THROW(store.add("w", {2, 3}, false), Error);  // another decay
  store.share_existing(false);
  store.allocate();
  EXPECT_EQ(store.specs().size(), 1u);
  EXPECT_EQ(again.w(), a.w());
  EXPECT_EQ(again.g(), a.g());
}

}  // namespace
}  // namespace kiln
