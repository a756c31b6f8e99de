// core/arena.h — per-step scratch memory with stable addresses. The first step allocates
// blocks as requests arrive and records the high-water mark; reset() after that step folds
// them into one block of that size, so every later step with the same shapes hands out the
// same addresses and allocates nothing (CUDA graphs replay against fixed pointers).
#pragma once
#include <cstddef>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

// `n` bytes rounded up to the 64-byte alignment of every Arena allocation.
size_t align_up(size_t n);

class Arena {
 public:
  explicit Arena(Device device = Device::cpu()) : device_(device) {}

  // Uninitialised memory for `shape` x `dtype`, 64-byte aligned, valid until reset().
  Tensor alloc(const Shape& shape, DType dtype);
  // The bytes alloc() takes for `numel` elements of `dtype` (a scratch estimate's unit).
  static size_t bytes_taken(int64_t numel, DType dtype);
  // Frees everything handed out since the last reset (addresses are reused in order).
  void reset();
  // Before the first step: one block of `bytes` when that is more than it holds, so that a first
  // step whose scratch the caller knows (ops::conv2d_scratch_bytes) allocates no block after
  // block on the way to its high-water mark. Nothing may be in use.
  void reserve(size_t bytes);
  // Where the next allocation goes. restore(mark) puts it back there: freeing an op's own scratch
  // when it returns (ScratchScope: ops on one device stream run in order, so the next op may reuse
  // the memory while a kernel that used it is still queued), or giving a replayed sequence of ops
  // (backend/graph.h) the addresses it had when it was captured. A mark is valid while the arena
  // keeps its blocks (until a reset() that grows it).
  struct Mark {
    size_t block = 0, block_offset = 0, offset = 0;
  };
  Mark mark() const { return {block_, block_offset_, offset_}; }
  void restore(const Mark& m);

  size_t in_use() const { return offset_; }          // bytes handed out since reset()
  size_t high_water() const { return high_water_; }  // most bytes in use at once, ever
  size_t capacity() const;                           // bytes held
  int64_t block_allocations() const { return block_allocations_; }  // heap allocations made
  bool folded() const { return blocks_.size() == 1; }  // one block: addresses repeat each step

 private:
  Device device_;
  std::vector<Tensor> blocks_;  // after the first reset: exactly one
  size_t block_ = 0, offset_ = 0, block_offset_ = 0, high_water_ = 0;
  int64_t block_allocations_ = 0;
};

}  // namespace kiln
