// core/init.h — random draws for parameter initialisation, pure functions of (seed, parameter,
// element) so weights do not depend on thread count.
#pragma once
#include <cmath>
#include <cstdint>

#include "kiln/core/philox.h"

namespace kiln {

// The MLPerf truncated normal (tinygrad's sampler): the first of 8 standard-normal draws with
// |x| <= 2, or 0 if none is; draw k of element e comes from stream (init, param, k).
inline float truncated_normal(uint64_t seed, uint32_t param, uint64_t element) {
  for (uint64_t attempt = 0; attempt < 8; ++attempt) {
    const float x = RngStream{seed, rng_stream(RngPurpose::init, param, attempt)}.normal(element);
    if (std::fabs(x) <= 2.0f) return x;
  }
  return 0.0f;
}

}  // namespace kiln
