// backend/cuda/warpgroup_mma.h — sm_90's warpgroup products (wgmma.mma_async, A in registers, B in
// shared memory under a matrix descriptor): the descriptors of warp_mma.h's core-matrix tiles and
// the host's emulation of a product, which reads B through its descriptor.
//
// A warpgroup is 4 consecutive warps. In wgmma m64nNk16 warp w holds A's and D's rows 16 w ..
// 16 w + 15 in mma.m16n8k16's A and C layouts, D's 8-column tile j in registers 4 j .. 4 j + 3: a
// warp's fragments are those of its m16n8k16 products (warp_mma.h), N / 8 of them in one.
//
// A descriptor (PTX ISA, "Matrix Descriptor Format"): the start address, the leading and the stride
// byte offsets, each >> 4 in 14 bits at bits 0, 16 and 32; base offset (bits 49-51) and swizzle
// mode (bits 62-63) 0, no swizzle. Without swizzle B is 8 x 8 core matrices of 8 rows of 16
// bytes, a core's 16-byte rows along K (K-major, B of a tile's rows) or along N (MN-major,
// transposed, B of its columns); cores neighbouring in K lie the leading offset apart, in N the
// stride offset (CUTLASS's canonical layouts, make_gmma_desc).
#pragma once
#include <cstdint>

#include "kiln/backend/cuda/warp_mma.h"

namespace kiln::ops::cuda {

KILN_HD constexpr uint64_t wgmma_desc(uint32_t start, uint32_t leading, uint32_t stride) {
  return uint64_t(start >> 4 & 0x3fffu) | uint64_t(leading >> 4 & 0x3fffu) << 16 |
         uint64_t(stride >> 4 & 0x3fffu) << 32;
}

// B of k-step kk (B's rows 16 kk .. 16 kk + 15) of a tile of `cols` columns at shared address
// `tile` (16-byte aligned), `kind` as in warp_mma.h: of its rows, cores in K (its columns) 128
// bytes apart, in N (its row groups) 16 cols; of its columns, in K (row groups) 16 cols, in N 128.
KILN_HD constexpr uint64_t wgmma_b_desc(uint32_t tile, int cols, BOf kind, int kk) {
  const uint32_t group = uint32_t(16 * cols);  // bytes of a row group
  return kind == BOf::rows ? wgmma_desc(tile + 256u * uint32_t(kk), 128u, group)
                           : wgmma_desc(tile + 2u * group * uint32_t(kk), group, 128u);
}

// The shared address of B(k, n) (k < 16) as the tensor cores read it through `desc`, B transposed
// (MN-major) or not.
KILN_HD constexpr uint32_t wgmma_b_address(uint64_t desc, bool transposed, int k, int n) {
  const uint32_t start = uint32_t(desc & 0x3fffu) << 4, leading = uint32_t(desc >> 16 & 0x3fffu) << 4,
                 stride = uint32_t(desc >> 32 & 0x3fffu) << 4;
  const uint32_t cores = uint32_t(k / 8) * leading + uint32_t(n / 8) * stride;
  const uint32_t within = transposed ? uint32_t(k % 8 * 16 + n % 8 * 2) : uint32_t(n % 8 * 16 + k % 8 * 2);
  return start + cores + within;
}

namespace host_warpgroup {

// c(x)[j] += A B (j < N / 8) for the 4 warps of a block of kFlashThreads (one warpgroup): A each
// warp's 16 x 16 from its lanes' a(x), B 16 x N of T read at wgmma_b_address from `smem` (shared
// address 0), each element's 16 terms summed in k order in f32 and then added, as host_warp::mma.
template <int N, typename T, typename Regs, typename FC, typename FA>
void mma(Regs& r, FC c, FA a, const char* smem, uint64_t desc, bool transposed) {
  float bm[16][N];
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < N; ++n) {
      T v;
      std::memcpy(&v, smem + wgmma_b_address(desc, transposed, k, n), sizeof v);
      bm[k][n] = load(v);
    }
  for (int w = 0; w < 4; ++w) {
    float am[16][16];
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < 8; ++i) am[a_row(l, i)][a_col(l, i)] = host_warp::element(a(r[32 * w + l]).r[i / 2], i);
    for (int l = 0; l < 32; ++l)
      for (int j = 0; j < N / 8; ++j)
        for (int i = 0; i < 4; ++i) {
          float sum = 0.0f;
          for (int k = 0; k < 16; ++k) sum += am[c_row(l, i)][k] * bm[k][8 * j + c_col(l, i)];
          c(r[32 * w + l])[j].c[i] += sum;
        }
  }
}

}  // namespace host_warpgroup

}  // namespace kiln::ops::cuda
