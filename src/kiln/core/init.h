// core/init.h — random draws for parameter initialisation, pure functions of (seed, parameter
// name, element), so weights do not depend on thread count, on the order parameters are
// registered in, or on how a parameter is split across tensor-parallel ranks (a shard draws
// the elements of the whole tensor that it holds).
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

#include "kiln/core/philox.h"

namespace kiln {

// Stream `draw` of parameter `name`: purpose in the top 8 bits, the draw number in the next 8,
// the low 48 bits of the name's FNV-1a hash below.
constexpr uint64_t init_stream(std::string_view name, uint32_t draw = 0) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return (uint64_t(RngPurpose::init) << 56) | (uint64_t(draw & 0xffu) << 48) |
         (h & 0xffffffffffffull);
}

inline RngStream init_rng(uint64_t seed, std::string_view name) {
  return RngStream{seed, init_stream(name)};
}

// The MLPerf truncated normal (tinygrad's sampler): the first of 8 standard-normal draws with
// |x| <= 2, or 0 if none is; draw k of element e comes from init_stream(name, k).
inline float truncated_normal(uint64_t seed, std::string_view name, uint64_t element) {
  for (uint32_t attempt = 0; attempt < 8; ++attempt) {
    const float x = RngStream{seed, init_stream(name, attempt)}.normal(element);
    if (std::fabs(x) <= 2.0f) return x;
  }
  return 0.0f;
}

}  // namespace kiln
