// ParamStore::share_existing: a name registered again returns the parameter registered first
// (pipeline slot instances share weights and gradients), and only while it is on, with the same
// shape and decay (and, for a tensor-parallel part, the same part).
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

// A shared tensor-parallel part keeps its own part, and leaves the parameter registered last alone.
TEST(ParamSharing, ASharedPartIsTheSamePartAndChangesNoOtherParameter) {
  ParamStore store;
  const Param part = store.add_part("split", {8, 5}, true, 0, 4, 4);
  const Param last = store.add("bias", {5}, false);
  store.share_existing(true);
  EXPECT_EQ(store.add_part("split", {8, 5}, true, 0, 4, 4).id, part.id);
  EXPECT_THROW(store.add_part("split", {8, 5}, true, 0, 0, 4), Error);  // another part
  store.share_existing(false);
  const ParamSpec& bias = store.specs()[size_t(last.id)];
  EXPECT_EQ(bias.part_dim, -1);
  EXPECT_EQ(bias.full_shape, Shape({5}));
  const ParamSpec& split = store.specs()[size_t(part.id)];
  EXPECT_EQ(split.part_dim, 0);
  EXPECT_EQ(split.part_start, 4);
  EXPECT_EQ(split.full_shape, Shape({8, 5}));
}

}  // namespace
}  // namespace kiln
