// The warps' register products (backend/cuda/warp_mma.h) on the CPU: the per-thread fragment
// loaders and the C-to-A repack against PTX's element numbering, the fragment layouts' cover of
// their matrices, the host's emulated products against float64 and its quad reductions against
// the device's shuffle order.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/backend/cuda/attention_tiles.h"
#include "cuda_bodies.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::max_rel_error;
using testing::random_normal;

// Every (row, column) of a rows x cols matrix once over 32 lanes' n elements each.
template <typename Row, typename Col>
bool covers_once(int rows, int cols, int n, Row row, Col col) {
  std::set<std::pair<int, int>> seen;
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < n; ++i) {
      const int r = row(l, i), c = col(l, i);
      if (r < 0 || r >= rows || c < 0 || c >= cols || !seen.insert({r, c}).second) return false;
    }
  return int(seen.size()) == rows * cols;
}

TEST(WarpMma, FragmentLayoutsCoverTheirMatricesOnce) {
  EXPECT_TRUE(covers_once(16, 16, 8, a_row, a_col));
  EXPECT_TRUE(covers_once(16, 8, 4, b_row, b_col));
  EXPECT_TRUE(covers_once(16, 8, 4, c_row, c_col));
}

// A tile (core_offset's layout) whose element (r, c) carries the code r * 64 + c: its value in f32,
// its bits in bf16 and f16 (no arithmetic touches them).
template <typename T>
std::vector<T> numbered_tile(int rows, int cols) {
  std::vector<T> t(size_t(rows * cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      T& x = t[size_t(core_offset(cols, r, c))];
      if constexpr (std::is_same_v<T, float>) x = float(r * 64 + c);
      else x = T{uint16_t(r * 64 + c)};
    }
  return t;
}

TEST(WarpMma, CoreOffsetsNumberATileOnceInCoresOf128Bytes) {
  for (int cols : {8, 16, 48, 128}) {
    std::vector<int> seen(size_t(32 * cols), 0);
    for (int r = 0; r < 32; ++r)
      for (int c = 0; c < cols; ++c) {
        const int e = core_offset(cols, r, c);
        ASSERT_TRUE(e >= 0 && e < 32 * cols) << r << " " << c;
        ++seen[size_t(e)];
        // A core's 8 rows of 8 are its 64 consecutive elements, each row's 8 in column order.
        ASSERT_EQ(e - core_offset(cols, r / 8 * 8, c / 8 * 8), r % 8 * 8 + c % 8);
      }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 32 * cols) << cols;
  }
}
template <typename T>
int code_of(T x) {
  if constexpr (std::is_same_v<T, float>) return int(x);
  else return x.bits;
}
template <typename T>
int code_of(const Pair<T>& p, int i) {
  return code_of(i % 2 ? p.hi : p.lo);
}

// The loaders pick what PTX numbers each lane's element i: A (16 x 16 from row 16, column 32), B as
// a tile's rows (B(k, n) = tile[n0 + n][k0 + k]) and as its columns (B(k, n) = tile[k0 + k][n0 + n]);
// c_offset finds C's (16 x 8 from row 16, column 40).
TEST(WarpMma, LoadersPickThePtxElementOfEachLane) {
  for_each_type([](auto tag) {
    using T = decltype(tag);
    const int cols = 48;
    const std::vector<T> tile = numbered_tile<T>(32, cols);
    for (int l = 0; l < 32; ++l) {
      const AFrag<T> a = a_frag(tile.data(), cols, 16, 32, l);
      for (int i = 0; i < 8; ++i) ASSERT_EQ(code_of(a.r[i / 2], i), (16 + a_row(l, i)) * 64 + 32 + a_col(l, i));
      const BFrag<T> rows = b_frag_of_rows(tile.data(), cols, 8, 16, l);
      const BFrag<T> of_cols = b_frag_of_cols(tile.data(), cols, 16, 8, l);
      for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(code_of(rows.r[i / 2], i), (8 + b_col(l, i)) * 64 + 16 + b_row(l, i)) << "lane " << l;
        ASSERT_EQ(code_of(of_cols.r[i / 2], i), (16 + b_row(l, i)) * 64 + 8 + b_col(l, i)) << "lane " << l;
        ASSERT_EQ(code_of(tile[size_t(c_offset(cols, 16, 40, l, i))]), (16 + c_row(l, i)) * 64 + 40 + c_col(l, i));
      }
    }
  });
}

// Two C tiles repacked as A: A's element (r, c) is the left tile's (r, c) for c < 8, else the right
// one's (r, c - 8) (values r * 16 + c, exact in bf16).
TEST(WarpMma, CTilesRepackAsTheAOperandOfTheirColumns) {
  for (int l = 0; l < 32; ++l) {
    CFrag left, right;
    for (int i = 0; i < 4; ++i) {
      left.c[i] = float(c_row(l, i) * 16 + c_col(l, i));
      right.c[i] = float(c_row(l, i) * 16 + 8 + c_col(l, i));
    }
    const AFrag<bf16_t> a = a_frag_of<bf16_t>(left, right);
    for (int i = 0; i < 8; ++i) {
      const Pair<bf16_t>& p = a.r[i / 2];
      ASSERT_EQ(load(i % 2 ? p.hi : p.lo), float(a_row(l, i) * 16 + a_col(l, i))) << "lane " << l;
    }
  }
}

// One thread's fragments of a test product.
template <typename T>
struct ProductRegs {
  AFrag<T> a;
  BFrag<T> b;
  CFrag c;
};

// C (16 x 8) += A B for each warp w of a block: A rows 16 w .. of a (64 x 16) tile, B either the
// first 8 rows of a (8 x 16) tile read as its columns' transpose or a (16 x 8) tile read as is;
// C starts at the product's own initial values, and is compared in float64.
TEST(WarpMma, HostProductsOfFragmentsMatchFloat64) {
  for_each_type([](auto tag) {
    using T = decltype(tag);
    const std::vector<T> a = stored<T>(random_normal(64 * 16, 1)), k = stored<T>(random_normal(8 * 16, 2)),
                         v = stored<T>(random_normal(16 * 8, 3));
    const std::vector<float> c0 = random_normal(kFlashThreads * 4, 4);
    for (bool of_rows : {true, false}) {
      HostTiles t;
      HostTiles::Regs<ProductRegs<T>> r;
      t.threads([&](int th) {
        r[th].a = a_frag(a.data(), 16, th / 32 * 16, 0, th % 32);
        for (int i = 0; i < 4; ++i) r[th].c.c[i] = c0[size_t(th * 4 + i)];
        if (of_rows) r[th].b = b_frag_of_rows(k.data(), 16, 0, 0, th % 32);
      });
      if (!of_rows) t.b_of_cols(r, [](auto& x) -> BFrag<T>& { return x.b; }, v.data(), 8, 0, 0);
      using X = ProductRegs<T>;
      t.mma(r, [](X& x) -> CFrag& { return x.c; }, [](X& x) -> const AFrag<T>& { return x.a; },
            [](X& x) -> const BFrag<T>& { return x.b; });
      std::vector<float> got;
      std::vector<double> want;
      for (int th = 0; th < kFlashThreads; ++th)
        for (int i = 0; i < 4; ++i) {
          const int row = th / 32 * 16 + c_row(th % 32, i), col = c_col(th % 32, i);
          double sum = c0[size_t(th * 4 + i)];
          for (int kk = 0; kk < 16; ++kk)
            sum += double(load(a[size_t(core_offset(16, row, kk))])) *
                   load(of_rows ? k[size_t(core_offset(16, col, kk))] : v[size_t(core_offset(8, kk, col))]);
          got.push_back(r[th].c.c[i]);
          want.push_back(sum);
        }
      EXPECT_LT(max_rel_error(got, want), 1e-5) << "B of rows " << of_rows;
    }
  });
}

// Each lane ends with its group of four's max and sum; the sum in the shuffles' order, (v[l] +
// v[l ^ 1]) + (v[l ^ 2] + v[l ^ 3]), so that all four agree bit for bit.
TEST(WarpMma, QuadReductionsCombineTheFourLanesOfARowInTheShufflesOrder) {
  const std::vector<float> v = random_normal(kFlashThreads, 5);
  struct Two {
    float max, sum;
  };
  HostTiles t;
  HostTiles::Regs<Two> r;
  t.threads([&](int th) { r[th] = {v[size_t(th)], v[size_t(th)]}; });
  t.quad_max(r, [](Two& x) -> float& { return x.max; });
  t.quad_sum(r, [](Two& x) -> float& { return x.sum; });
  for (int th = 0; th < kFlashThreads; ++th) {
    const auto at = [&](int mask) { return v[size_t(th ^ mask)]; };
    EXPECT_EQ(r[th].max, std::max({at(0), at(1), at(2), at(3)})) << th;
    const float mine = at(0) + at(1), other = at(2) + at(3);
    EXPECT_EQ(r[th].sum, mine + other) << th;
    EXPECT_EQ(r[th].sum, r[th ^ 3].sum) << th;
  }
}

}  // namespace
}  // namespace kiln
