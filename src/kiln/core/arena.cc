#include "kiln/core/arena.h"

#include <algorithm>

#include "kiln/core/error.h"

namespace kiln {
namespace {
constexpr size_t kAlign = 64;
constexpr size_t kMinBlock = size_t(1) << 20;
}  // namespace

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

size_t Arena::bytes_taken(int64_t numel, DType dtype) { return align_up(size_t(numel) * dtype_size(dtype)); }

Tensor Arena::alloc(const Shape& shape, DType dtype) {
  const size_t bytes = bytes_taken(shape_numel(shape), dtype);
  while (block_ < blocks_.size() && block_offset_ + bytes > blocks_[block_].nbytes()) {
    ++block_;
    block_offset_ = 0;
  }
  if (block_ == blocks_.size()) {
    const size_t size = std::max(bytes, kMinBlock);
    blocks_.push_back(Tensor::empty({int64_t(size)}, DType::u8, device_));
    ++block_allocations_;
    block_offset_ = 0;
  }
  Tensor t = Tensor::view(static_cast<std::byte*>(blocks_[block_].data) + block_offset_, shape, dtype);
  t.device = device_;
  t.storage = blocks_[block_].storage;
  block_offset_ += bytes;
  offset_ += bytes;
  high_water_ = std::max(high_water_, offset_);
  return t;
}

void Arena::reset() {
  // Several blocks, or one too small for the measured peak: replace them by one block of the
  // high-water mark so that later steps see the same addresses in the same order.
  if (blocks_.size() > 1 || (!blocks_.empty() && blocks_[0].nbytes() < high_water_)) {
    blocks_.clear();
    blocks_.push_back(Tensor::empty({int64_t(high_water_)}, DType::u8, device_));
    ++block_allocations_;
  }
  block_ = 0;
  block_offset_ = 0;
  offset_ = 0;
}

void Arena::reserve(size_t bytes) {
  KILN_CHECK(offset_ == 0, "scratch arena: reserve({}) while {} bytes are in use", bytes, offset_);
  if (capacity() >= bytes && blocks_.size() <= 1) return;
  blocks_.clear();
  blocks_.push_back(Tensor::empty({int64_t(align_up(bytes))}, DType::u8, device_));
  ++block_allocations_;
  block_ = 0;
  block_offset_ = 0;
}

void Arena::restore(const Mark& m) {
  KILN_CHECK(m.block < std::max<size_t>(blocks_.size(), 1) &&
                 (blocks_.empty() || m.block_offset <= blocks_[m.block].nbytes()),
             "scratch arena: no byte {} of block {} among its {} block(s)", m.block_offset, m.block, blocks_.size());
  block_ = m.block;
  block_offset_ = m.block_offset;
  offset_ = m.offset;
}

size_t Arena::capacity() const {
  size_t n = 0;
  for (const Tensor& b : blocks_) n += b.nbytes();
  return n;
}

}  // namespace kiln
