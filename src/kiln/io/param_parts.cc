#include "kiln/io/param_parts.h"

#include <algorithm>

namespace kiln::io {

namespace {

// A part as `outer` blocks of `count` x `inner` contiguous elements, at `start` x `inner` within
// each whole block of `full` x `inner`.
struct PartBlocks {
  int64_t outer = 1, inner = 1, count = 1, start = 0, full = 1;
};

PartBlocks part_blocks(const ParamSpec& s) {
  PartBlocks b;
  if (s.part_dim < 0) {
    b.count = b.full = s.numel;
    return b;
  }
  const size_t d = size_t(s.part_dim);
  for (size_t i = 0; i < d; ++i) b.outer *= s.full_shape[i];
  for (size_t i = d + 1; i < s.full_shape.size(); ++i) b.inner *= s.full_shape[i];
  b.count = s.shape[d], b.start = s.part_start, b.full = s.full_shape[d];
  return b;
}

}  // namespace

void extract_part(const ParamSpec& spec, const float* whole, float* part) {
  const PartBlocks b = part_blocks(spec);
  for (int64_t o = 0; o < b.outer; ++o)
    std::copy_n(whole + (o * b.full + b.start) * b.inner, b.count * b.inner, part + o * b.count * b.inner);
}

void insert_part(const ParamSpec& spec, const float* part, float* whole) {
  const PartBlocks b = part_blocks(spec);
  for (int64_t o = 0; o < b.outer; ++o)
    std::copy_n(part + o * b.count * b.inner, b.count * b.inner, whole + (o * b.full + b.start) * b.inner);
}

}  // namespace kiln::io
