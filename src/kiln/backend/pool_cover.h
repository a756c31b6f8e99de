// backend/pool_cover.h — which pooling outputs read an input element: the gathers of every
// backend's max-pool backward walk them in the same order (host and device code).
#pragma once
#include <cstdint>

#include "kiln/core/hd.h"

namespace kiln::ops {

// The outputs [first, last] along one axis whose windows cover input index h (none when
// first > last).
struct PoolCover {
  int64_t first, last;
};
KILN_HD inline PoolCover pool_cover(int64_t h, int64_t pad, int64_t window, int64_t stride, int64_t outputs) {
  const int64_t lowest = h + pad - window + 1;  // an output's window starts at o * stride - pad
  const int64_t last = (h + pad) / stride;
  return {lowest <= 0 ? 0 : (lowest + stride - 1) / stride, last < outputs ? last : outputs - 1};
}

}  // namespace kiln::ops
