// InlineVector, the inline list behind tensor shapes and a step's loss parts: it behaves as the
// std::vector it replaced, and a value past its capacity is a kiln::Error, not an overrun.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/inline_vector.h"
#include "kiln/core/tensor.h"

namespace kiln {

TEST(InlineVector, HoldsValuesAsAVectorWould) {
  InlineVector<int64_t, 4> v = {2, 3};
  v.push_back(5);
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(v.front(), 2);
  EXPECT_EQ(v.back(), 5);
  EXPECT_EQ(std::vector<int64_t>(v.begin(), v.end()), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(v, (InlineVector<int64_t, 4>{2, 3, 5}));
  EXPECT_FALSE(v == (InlineVector<int64_t, 4>{2, 3}));
  EXPECT_FALSE(v == (InlineVector<int64_t, 4>{2, 3, 6}));
  v.assign(2, 7);
  EXPECT_EQ(v, (InlineVector<int64_t, 4>{7, 7}));
  const std::vector<double> from{1.5, 2.5};
  const InlineVector<double, 2> copied(from.begin(), from.end());
  EXPECT_EQ(copied[1], 2.5);
}

TEST(InlineVector, APastItsCapacityIsAnErrorNamingIt) {
  InlineVector<int64_t, 2> v = {1, 2};
  try {
    v.push_back(3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 2 values"), std::string::npos) << e.what();
  }
  EXPECT_EQ(v.size(), 2u);
  EXPECT_THROW(v.assign(3, 0), Error);
  EXPECT_THROW(Tensor::view(nullptr, {1, 1, 1, 1, 1, 1, 1, 1, 1}), Error);  // rank 9
}

}  // namespace kiln
