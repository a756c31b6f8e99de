// backend/cuda/grid.h — how a CUDA launch maps threads to work items, as plain functions that
// the kernels use on the device and the host tests use to run a kernel's body on the CPU over
// exactly the same index space.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kiln/core/hd.h"

namespace kiln::ops::cuda {

// A 1-D grid; thread t of block b starts at item b * threads + t and strides by the grid size.
struct Grid {
  uint32_t blocks = 1, threads = 256;
};

// Enough blocks of 256 threads for n items, at most 4096 blocks (the rest is grid-stride).
inline Grid grid_for(int64_t n) {
  constexpr int64_t kThreads = 256, kMaxBlocks = 4096;
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks);
  return {uint32_t(blocks), uint32_t(kThreads)};
}

KILN_HD inline int64_t first_item(const Grid& g, uint32_t block, uint32_t thread) {
  return int64_t(block) * g.threads + thread;
}
KILN_HD inline int64_t item_stride(const Grid& g) { return int64_t(g.blocks) * g.threads; }

// What one thread of the launch does: body(i) for each of its items below n.
template <typename Body>
KILN_HD void run_thread(const Grid& g, uint32_t block, uint32_t thread, int64_t n,
                        const Body& body) {
  for (int64_t i = first_item(g, block, thread); i < n; i += item_stride(g)) body(i);
}

// The whole launch on the host, thread by thread (tests).
template <typename Body>
void run_on_host(const Grid& g, int64_t n, const Body& body) {
  for (uint32_t b = 0; b < g.blocks; ++b)
    for (uint32_t t = 0; t < g.threads; ++t) run_thread(g, b, t, n, body);
}

}  // namespace kiln::ops::cuda
