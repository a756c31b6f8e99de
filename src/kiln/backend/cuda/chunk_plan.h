// backend/cuda/chunk_plan.h — the chunk table of the CUDA multi-tensor kernels (optim_bodies.h):
// every segment cut into chunks of kSumChunk elements, in segment order, and its chunks into groups
// of kGroupChunks (the sums' tree, optim_bodies.h). Plain host code, tested
// on the CPU; optim_ops.cc keeps one copy per segment list on the device.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/optim_bodies.h"

namespace kiln::ops::cuda {

struct ChunkPlan {
  std::vector<Chunk> chunks;
  std::vector<SegmentChunks> segments;
  std::vector<ChunkGroup> groups;
};

inline ChunkPlan plan_chunks(std::span<const TensorSegment> segments) {
  ChunkPlan plan;
  for (size_t k = 0; k < segments.size(); ++k) {
    const TensorSegment& s = segments[k];
    SegmentChunks sc{int64_t(plan.chunks.size()), 0, s.decay ? 1 : 0, int64_t(plan.groups.size()), 0};
    for (int64_t begin = 0; begin < s.numel; begin += kSumChunk, ++sc.count)
      plan.chunks.push_back({s.offset + begin, int32_t(std::min(kSumChunk, s.numel - begin)),
                             int32_t(k)});
    for (int64_t c = 0; c < sc.count; c += kGroupChunks, ++sc.groups)
      plan.groups.push_back({sc.first + c, std::min<int64_t>(kGroupChunks, sc.count - c)});
    plan.segments.push_back(sc);
  }
  return plan;
}

}  // namespace kiln::ops::cuda
