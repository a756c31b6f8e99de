// backend/cuda/warp_mma.h — a warp's tensor-core products with their operands in registers: PTX's
// mma.sync.m16n8k16 (bf16 / f16 in, f32 accumulated), its fragment layouts, the per-thread code
// that loads and repacks fragments (run as is on the device and on the host), and the host's
// emulation of the warp's collective steps over all 32 lanes' registers.
//
// Lane l of a warp: group g = l / 4, thread in group t = l % 4. Its fragments (PTX ISA, "Matrix
// Fragments for mma.m16n8k16"; (row, column), a pair the two neighbours of a column range):
//   A (16 x 16)        r[0] (g, 2t..2t+1)  r[1] (g+8, 2t..2t+1)  r[2] (g, 2t+8..)  r[3] (g+8, 2t+8..)
//   B (16 x 8, k x n)  r[0] (2t..2t+1, g)  r[1] (2t+8..2t+9, g)
//   C (16 x 8, f32)    c[0], c[1] (g, 2t..2t+1)  c[2], c[3] (g+8, 2t..2t+1)
// A pair's first element is its register's low half. So C's layout of two neighbouring 16 x 8
// tiles is A's of their 16 x 16 (a_frag_of): a product's result feeds the next one's A in registers.
#pragma once
#include <cstring>
#include <memory>
#include <type_traits>

#include "kiln/backend/cuda/hd_types.h"
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif

#if defined(__CUDA_ARCH__)
#define KILN_UNROLL _Pragma("unroll")
#else
#define KILN_UNROLL
#endif

namespace kiln::ops::cuda {

template <typename T>
struct Pair {
  T lo, hi;
};
template <typename T>
struct AFrag {
  Pair<T> r[4];
};
template <typename T>
struct BFrag {
  Pair<T> r[2];
};
struct CFrag {
  float c[4];
};

// Where lane l's element i of a fragment sits in its matrix, element by element as PTX numbers them
// (A: a0..a7, B: b0..b3, C: c0..c3).
KILN_HD constexpr int a_row(int l, int i) { return l / 4 + 8 * (i / 2 % 2); }
KILN_HD constexpr int a_col(int l, int i) { return 2 * (l % 4) + i % 2 + 8 * (i / 4); }
KILN_HD constexpr int b_row(int l, int i) { return 2 * (l % 4) + i % 2 + 8 * (i / 2); }
KILN_HD constexpr int b_col(int l, int) { return l / 4; }
KILN_HD constexpr int c_row(int l, int i) { return l / 4 + 8 * (i / 2); }
KILN_HD constexpr int c_col(int l, int i) { return 2 * (l % 4) + i % 2; }

// Two neighbouring elements, p 4-byte aligned (an even column of a tile): one 32-bit shared-memory
// read on the device.
template <typename T>
KILN_HD Pair<T> pair_at(const T* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Pair<T>*>(p);
#else
  Pair<T> pair;
  std::memcpy(&pair, p, sizeof pair);
  return pair;
#endif
}

// Shared-memory tiles of 16-bit values are 8 x 8 core matrices, each 128 contiguous bytes (its 8
// rows of 16), a row group's cores side by side, then the next row group: element (r, c) of a tile
// of `cols` columns (a multiple of 8) is element core_offset(cols, r, c). The 8 rows that a
// fragment read or an ldmatrix spans are one core's 128 bytes (no bank conflicts, 16-byte row
// addresses), and it is the layout wgmma reads without swizzling (warpgroup_mma.h).
KILN_HD constexpr int core_offset(int cols, int r, int c) { return r / 8 * 8 * cols + c / 8 * 64 + r % 8 * 8 + c % 8; }

// How a tile is a product's B: B(k, n) = tile(n, k), its rows as B's columns (K's rows for
// S = Q K^T; wgmma's K-major B), or tile(k, n), its columns (V's for O = P V; MN-major).
enum class BOf { rows, cols };

// The loaders below address a fragment's elements as a core (row0, col0 multiples of 8, constants
// in the kernels' unrolled loops) plus the lane's place in it, so that no lane computes a core
// index of its own: 8 rows on is 8 cols elements on, 8 columns on 64.

// A from rows row0.. and columns col0.. of a tile.
template <typename T>
KILN_HD AFrag<T> a_frag(const T* tile, int cols, int row0, int col0, int lane) {
  const T* p = tile + core_offset(cols, row0, col0) + lane / 4 * 8 + 2 * (lane % 4);
  return {{pair_at(p), pair_at(p + 8 * cols), pair_at(p + 64), pair_at(p + 8 * cols + 64)}};
}

// B whose column n is row n0 + n of a tile, from its column k0: B(k, n) = tile(n0 + n, k0 + k).
template <typename T>
KILN_HD BFrag<T> b_frag_of_rows(const T* tile, int cols, int n0, int k0, int lane) {
  const T* p = tile + core_offset(cols, n0, k0) + lane / 4 * 8 + 2 * (lane % 4);
  return {{pair_at(p), pair_at(p + 64)}};
}

// B as rows k0.. and columns n0.. of a tile: B(k, n) = tile(k0 + k, n0 + n). Element by element;
// the device loads it with ldmatrix's transposing form.
template <typename T>
KILN_HD BFrag<T> b_frag_of_cols(const T* tile, int cols, int k0, int n0, int lane) {
  const T* p = tile + core_offset(cols, k0, n0) + 2 * (lane % 4) * 8 + lane / 4;
  return {{{p[0], p[8]}, {p[8 * cols], p[8 * cols + 8]}}};
}

// Where C's element i of lane `lane` sits in a tile whose rows row0.. and columns col0.. (multiples
// of 8) the C tile covers.
KILN_HD constexpr int c_offset(int cols, int row0, int col0, int lane, int i) {
  return core_offset(cols, row0 + 8 * (i / 2), col0) + lane / 4 * 8 + 2 * (lane % 4) + i % 2;
}

// (lo, hi) rounded to nearest even in T: on the device one conversion instruction for both (the
// same bits as store<T>'s integer rounding, NaN payloads aside).
template <typename T>
KILN_HD Pair<T> rounded_pair(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>) {
    Pair<T> p;
    if constexpr (std::is_same_v<T, bf16_t>) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
      memcpy(&p, &v, sizeof p);
    } else {
      const __half2 v = __floats2half2_rn(lo, hi);
      memcpy(&p, &v, sizeof p);
    }
    return p;
  }
#endif
  return {store<T>(lo), store<T>(hi)};
}

// Two C tiles (columns 0-7, 8-15 of 16 rows) rounded to T as the A operand of their 16 x 16.
template <typename T>
KILN_HD AFrag<T> a_frag_of(const CFrag& left, const CFrag& right) {
  return {{rounded_pair<T>(left.c[0], left.c[1]), rounded_pair<T>(left.c[2], left.c[3]),
           rounded_pair<T>(right.c[0], right.c[1]), rounded_pair<T>(right.c[2], right.c[3])}};
}

// ---- the host's warps ----

// Every thread's registers of one type X for a thread block of `threads` threads (the device's are
// each thread's own: DeviceTiles::Regs).
template <typename X, int threads>
struct HostRegs {
  std::unique_ptr<X[]> x = std::make_unique<X[]>(threads);
  X& operator[](int thread) { return x[thread]; }
  const X& operator[](int thread) const { return x[thread]; }
};

// Warp w's collective steps on the host, each lane's fragments found by the accessors from its
// registers (r[32 w + lane]).
namespace host_warp {

template <typename T>
float element(const Pair<T>& p, int i) {
  return load(i % 2 ? p.hi : p.lo);
}

// c += a b for each lane's fragments: the 16 x 8 product summed in k order in f32 (the tensor
// cores' order within a product is their own).
template <typename Regs, typename FC, typename FA, typename FB>
void mma(Regs& r, int w, FC c, FA a, FB b) {
  float am[16][16], bm[16][8], cm[16][8];
  for (int l = 0; l < 32; ++l) {
    auto& x = r[32 * w + l];
    for (int i = 0; i < 8; ++i) am[a_row(l, i)][a_col(l, i)] = element(a(x).r[i / 2], i);
    for (int i = 0; i < 4; ++i) bm[b_row(l, i)][b_col(l, i)] = element(b(x).r[i / 2], i);
    for (int i = 0; i < 4; ++i) cm[c_row(l, i)][c_col(l, i)] = c(x).c[i];
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < 16; ++k) sum += am[i][k] * bm[k][j];
      cm[i][j] += sum;
    }
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) c(r[32 * w + l]).c[i] = cm[c_row(l, i)][c_col(l, i)];
}

// v = op(v, v of lane ^ 1), then op(v, v of lane ^ 2): a value over each group of four lanes (the
// threads of a C row), every lane of the group left with it, bit for bit the device's shuffles.
template <typename Regs, typename F, typename Op>
void quad_reduce(Regs& r, int w, F v, Op op) {
  for (int mask : {1, 2}) {
    float before[32];
    for (int l = 0; l < 32; ++l) before[l] = v(r[32 * w + l]);
    for (int l = 0; l < 32; ++l) v(r[32 * w + l]) = op(before[l], before[l ^ mask]);
  }
}

// to(lane l's registers) = from(lane src(l)'s) for each lane: the device's __shfl_sync.
template <typename Regs, typename From, typename To, typename Src>
void gather(Regs& r, int w, From from, To to, Src src) {
  uint32_t before[32];
  for (int l = 0; l < 32; ++l) before[l] = from(r[32 * w + l]);
  for (int l = 0; l < 32; ++l) to(r[32 * w + l]) = before[src(l)];
}

}  // namespace host_warp

}  // namespace kiln::ops::cuda
