// tests/backend/host_warpgroup_tiles.h — the host policy of the fused attention's block algorithms
// (attention_tiles.h) with the sm_90a kernels' products, for the tests that check those products
// against the warps' on the CPU.
#pragma once
#include "kiln/backend/cuda/attention_tiles.h"

namespace kiln::ops::cuda {

// HostTiles with the sm_90a kernels' products: per k-step the warpgroup's wgmma, B read through its
// descriptor (host_warpgroup::mma); a tile's shared address is its offset from itself (where it
// lies in a block's shared memory: every tile 16-byte aligned, CudaBodies.AttentionProducts*).
struct HostWarpgroupTiles : HostTiles {
  template <int N, int K, BOf kind, typename X, typename FC, typename FA, typename T>
  void products(Regs<X>& r, FC c, FA a, const T* tile, int cols) const {
    const auto* smem = reinterpret_cast<const char*>(tile);
    for (int kk = 0; kk < K / 16; ++kk)
      host_warpgroup::mma<N, T>(r, c, [a, kk](auto& x) -> const auto& { return a(x, kk); }, smem,
                                wgmma_b_desc(0, cols, kind, kk), kind == BOf::cols);
  }
};

}  // namespace kiln::ops::cuda
