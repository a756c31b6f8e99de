// sm_90a's warpgroup products (backend/cuda/warpgroup_mma.h) on the CPU: the descriptor's fields
// where PTX reads them, the addresses a descriptor of a core-matrix tile gives B's elements (a
// tile's rows as K-major B, its columns as MN-major), and the emulated wgmma against the warps'
// emulated mma.sync products bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kiln/backend/cuda/attention_tiles.h"
#include "cuda_bodies.h"
#include "host_warpgroup_tiles.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::random_normal;

TEST(WarpgroupMma, DescriptorFieldsSitWherePtxReadsThem) {
  const uint64_t desc = wgmma_desc(0x2a3b0u, 0x80u, 0x400u);
  EXPECT_EQ(desc & 0x3fffu, 0x2a3bu);          // start address >> 4, bits 0-13
  EXPECT_EQ(desc >> 16 & 0x3fffu, 0x8u);       // leading byte offset >> 4, bits 16-29
  EXPECT_EQ(desc >> 32 & 0x3fffu, 0x40u);      // stride byte offset >> 4, bits 32-45
  EXPECT_EQ(desc >> 46, 0u);                   // base offset 0, no swizzle (bits 62-63)
  EXPECT_EQ(desc & (3ull << 14 | 3ull << 30), 0u);
}

// B of each k-step through the descriptor is the tile's element: (n, 16 kk + k) of a tile's rows,
// (16 kk + k, n) of its columns, for tiles of the kernels' widths at a 16-byte aligned address.
TEST(WarpgroupMma, DescriptorsOfATileAddressItsElements) {
  const uint32_t base = 0x1230;
  for (int cols : {16, 32, 64, 128}) {
    const int rows = 64;
    for (int kk = 0; kk < cols / 16; ++kk)  // B of rows: N = rows, K = cols
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < rows; ++n)
          ASSERT_EQ(wgmma_b_address(wgmma_b_desc(base, cols, BOf::rows, kk), false, k, n),
                    base + 2u * uint32_t(core_offset(cols, n, 16 * kk + k)))
              << cols << " " << kk << " " << k << " " << n;
    for (int kk = 0; kk < rows / 16; ++kk)  // B of columns: K = rows, N = cols
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < cols; ++n)
          ASSERT_EQ(wgmma_b_address(wgmma_b_desc(base, cols, BOf::cols, kk), true, k, n),
                    base + 2u * uint32_t(core_offset(cols, 16 * kk + k, n)))
              << cols << " " << kk << " " << k << " " << n;
  }
}

// One thread's fragments of a test product: A per k-step, 64 columns of C, a B fragment.
template <typename T>
struct WideRegs {
  AFrag<T> a[4];
  CFrag c[8];
  BFrag<T> b;
};

// C (64 x 64) += A (64 x 64) B of a tile's rows and of its columns: the warpgroup's emulated wgmma
// (B through descriptors) and the warps' emulated m16n8k16 products (B fragments) bit for bit.
TEST(WarpgroupMma, HostProductsAsTheWarpsProducts) {
  const auto check = [](auto tag) {
    using T = decltype(tag);
    using X = WideRegs<T>;
    const std::vector<T> a = stored<T>(random_normal(64 * 64, 1)), b = stored<T>(random_normal(64 * 64, 2));
    const std::vector<float> c0 = random_normal(kFlashThreads * 32, 3);
    const auto c = [](X& x) -> CFrag* { return x.c; };
    const auto a_of = [](X& x, int kk) -> const AFrag<T>& { return x.a[kk]; };
    const auto run = [&](const auto& tiles, auto kind) {
      typename HostTiles::Regs<X> r;
      tiles.threads([&](int th) {
        for (int kk = 0; kk < 4; ++kk) r[th].a[kk] = a_frag(a.data(), 64, th / 32 * 16, 16 * kk, th % 32);
        std::memcpy(r[th].c, &c0[size_t(th * 32)], sizeof r[th].c);
      });
      tiles.template products<64, 64, decltype(kind)::value>(r, c, a_of, b.data(), 64);
      std::vector<float> out;
      for (int th = 0; th < kFlashThreads; ++th)
        for (const CFrag& f : r[th].c) out.insert(out.end(), f.c, f.c + 4);
      return out;
    };
    const std::integral_constant<BOf, BOf::rows> rows;
    const std::integral_constant<BOf, BOf::cols> cols;
    const std::vector<float> warps_rows = run(HostTiles{}, rows), warps_cols = run(HostTiles{}, cols);
    EXPECT_EQ(run(HostWarpgroupTiles{}, rows), warps_rows);
    EXPECT_EQ(run(HostWarpgroupTiles{}, cols), warps_cols);
    EXPECT_NE(warps_rows, warps_cols);  // the two read B differently
  };
  check(bf16_t{});
  check(f16_t{});
}

}  // namespace
}  // namespace kiln
