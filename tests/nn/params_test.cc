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

}  // namespace
}  // namespace kiln
