// tests/backend/segments.h — segments of given sizes over one flat buffer, as the multi-tensor
// op tests lay them out.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kiln/backend/backend.h"

namespace kiln::testing {

// Segments of `sizes` from offset 3 with 5-element gaps, weight decay on every other one;
// total = the buffer length they need.
inline std::vector<ops::TensorSegment> spaced_segments(std::initializer_list<int64_t> sizes, int64_t& total) {
  std::vector<ops::TensorSegment> segs;
  int64_t at = 3;
  for (int64_t size : sizes) {
    segs.push_back({at, size, segs.size() % 2 == 0});
    at += size + 5;
  }
  total = at;
  return segs;
}

}  // namespace kiln::testing
