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

// Blocks of 256 threads a launch gives each multiprocessor: 8 x 256 = 2048 threads, what an
// H100's or H200's multiprocessor holds at once, so that every multiprocessor has its full share
// of warps to hide memory latency behind; more items than that are grid-stride. A body's result
// never depends on the grid (each item is one thread's), only its speed.
inline constexpr int64_t kBlocksPerMultiprocessor = 8;

// Multiprocessors of an H100 SXM and of an H200 (132 each): the grid the host tests run on.
inline constexpr int kH200Multiprocessors = 132;

// Enough blocks of 256 threads for n items, at most kBlocksPerMultiprocessor per multiprocessor
// of the device.
inline Grid grid_for(int64_t n, int multiprocessors) {
  constexpr int64_t kThreads = 256;
  const int64_t most = kBlocksPerMultiprocessor * (multiprocessors > 0 ? multiprocessors : 1);
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, most);
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
