// backend/cuda/tensor_core_asm.cuh — the tensor-core instructions attention.cu's DeviceTiles
// issues: a warp's mma.sync m16n8k16 and ldmatrix (sm_80 on), and on sm_90a the warpgroup's
// wgmma.mma_async m64nNk16 with A in registers and B in shared memory under a descriptor
// (warpgroup_mma.h), with the fences, commit and wait around it (PTX ISA, "Asynchronous Warpgroup
// Level Matrix Multiply-Accumulate"). Each operand list is a literal: an instruction's shape and
// types are part of its name.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kiln/backend/cuda/warp_mma.h"

namespace kiln::ops::cuda {

template <typename T>
__device__ inline uint32_t bits_of(const Pair<T>& p) {
  uint32_t u;
  memcpy(&u, &p, sizeof u);
  return u;
}

// c += a b on the tensor cores: one m16n8k16 product of the warp, f32 accumulated.
#define KILN_MMA_16816(T, PTX)                                                                                   \
  __device__ inline void mma_16816(CFrag& c, const AFrag<T>& a, const BFrag<T>& b) {                            \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." PTX "." PTX ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, " \
        "{%0, %1, %2, %3};\n"                                                                                    \
        : "+f"(c.c[0]), "+f"(c.c[1]), "+f"(c.c[2]), "+f"(c.c[3])                                                \
        : "r"(bits_of(a.r[0])), "r"(bits_of(a.r[1])), "r"(bits_of(a.r[2])), "r"(bits_of(a.r[3])),                \
          "r"(bits_of(b.r[0])), "r"(bits_of(b.r[1])));                                                          \
  }
KILN_MMA_16816(bf16_t, "bf16")
KILN_MMA_16816(f16_t, "f16")

// b_frag_of_cols by ldmatrix: lanes 0-7 give rows k0 .. k0 + 7 (the first 8 x 8 matrix), lanes
// 8-15 rows k0 + 8 .., 16 bytes from column n0 each; .trans hands lane l the pairs (2t, 2t+1) of
// column g of each, B's layout.
template <typename T>
__device__ BFrag<T> ldmatrix_b_of_cols(const T* tile, int cols, int k0, int n0) {
  const int lane = int(threadIdx.x) % 32;
  const T* row = tile + core_offset(cols, k0, n0) + lane / 8 % 2 * 8 * cols + lane % 8 * 8;
  const unsigned address = unsigned(__cvta_generic_to_shared(row));
  uint32_t r0, r1;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(address));
  BFrag<T> b;
  memcpy(&b.r[0], &r0, sizeof r0);
  memcpy(&b.r[1], &r1, sizeof r1);
  return b;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// The operands of a wgmma with N / 2 accumulators: D's registers, A's four, B's descriptor, then the
// scale of D as predicate p (1: D += A B), A and B unscaled, B transposed or not.
#define KILN_WGMMA_OPERANDS_N16 \
  "{%0, %1, %2, %3, %4, %5, %6, %7}, " \
  "{%8, %9, %10, %11}, %12, p, 1, 1, %14;"
#define KILN_WGMMA_SCALE_N16 "%13"
#define KILN_WGMMA_OPERANDS_N32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, " \
  "{%16, %17, %18, %19}, %20, p, 1, 1, %22;"
#define KILN_WGMMA_SCALE_N32 "%21"
#define KILN_WGMMA_OPERANDS_N64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
  "{%32, %33, %34, %35}, %36, p, 1, 1, %38;"
#define KILN_WGMMA_SCALE_N64 "%37"
#define KILN_WGMMA_OPERANDS_N128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
  "{%64, %65, %66, %67}, %68, p, 1, 1, %70;"
#define KILN_WGMMA_SCALE_N128 "%69"
#define KILN_WGMMA_D1(j) "+f"(d[j].c[0]), "+f"(d[j].c[1]), "+f"(d[j].c[2]), "+f"(d[j].c[3])
#define KILN_WGMMA_D2(j) KILN_WGMMA_D1(j), KILN_WGMMA_D1(j + 1)
#define KILN_WGMMA_D4(j) KILN_WGMMA_D2(j), KILN_WGMMA_D2(j + 2)
#define KILN_WGMMA_D8(j) KILN_WGMMA_D4(j), KILN_WGMMA_D4(j + 4)
#define KILN_WGMMA_D16(j) KILN_WGMMA_D8(j), KILN_WGMMA_D8(j + 8)

// d[0 .. N / 8) += A B, the warpgroup's 64 x N: kTransposed B MN-major (of a tile's columns).
#define KILN_WGMMA(N, TILES, T, PTX)                                                                      \
  template <int kTransposed>                                                                             \
  __device__ inline void wgmma_n##N(CFrag* d, const AFrag<T>& a, uint64_t desc) {                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " KILN_WGMMA_SCALE_N##N ", 0;\n"                        \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " " KILN_WGMMA_OPERANDS_N##N \
                 "\n}\n"                                                                                   \
                 : KILN_WGMMA_D##TILES(0)                                                                  \
                 : "r"(bits_of(a.r[0])), "r"(bits_of(a.r[1])), "r"(bits_of(a.r[2])), "r"(bits_of(a.r[3])), \
                   "l"(desc), "r"(1), "n"(kTransposed));                                                   \
  }
KILN_WGMMA(16, 2, bf16_t, "bf16")
KILN_WGMMA(32, 4, bf16_t, "bf16")
KILN_WGMMA(64, 8, bf16_t, "bf16")
KILN_WGMMA(128, 16, bf16_t, "bf16")
KILN_WGMMA(16, 2, f16_t, "f16")
KILN_WGMMA(32, 4, f16_t, "f16")
KILN_WGMMA(64, 8, f16_t, "f16")
KILN_WGMMA(128, 16, f16_t, "f16")

template <int N, bool kTransposed, typename T>
__device__ inline void wgmma(CFrag* d, const AFrag<T>& a, uint64_t desc) {
  if constexpr (N == 16) wgmma_n16<kTransposed>(d, a, desc);
  else if constexpr (N == 32) wgmma_n32<kTransposed>(d, a, desc);
  else if constexpr (N == 64) wgmma_n64<kTransposed>(d, a, desc);
  else wgmma_n128<kTransposed>(d, a, desc);
}

// Orders the warpgroup's register writes before its next wgmma.
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// The wgmmas issued so far as one group; then waits for all groups to complete.
__device__ inline void wgmma_commit_and_wait() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

// Generic-proxy writes to shared memory (st.shared) made visible to the async proxy that wgmma
// reads B through; before the barrier that orders them before the products.
__device__ inline void fence_shared_for_wgmma() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The accumulators' registers are the tensor cores' from a wgmma to the wait: an empty asm that
// reads and writes each one, at both ends, keeps the compiler from moving their other reads and
// writes into that window.
template <int N>
__device__ inline void wgmma_hold(CFrag* d) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[j].c[i])::"memory");
}
// A's registers stay live to the wait (the tensor cores read them asynchronously too).
template <typename T>
__device__ inline void wgmma_hold(const AFrag<T>& a) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" ::"r"(bits_of(a.r[i])) : "memory");
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace kiln::ops::cuda
