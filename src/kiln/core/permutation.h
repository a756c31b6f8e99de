// core/permutation.h — a pseudo-random permutation computed per index (no permutation array).
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

#include "kiln/core/philox.h"

namespace kiln {

// A bijection on [0, n) that is a pure function of (seed, epoch): a balanced Feistel network over
// the smallest even bit width covering n, cycle-walking until the value is below n. Its six rounds
// draw from data streams rng_stream(RngPurpose::data, first_layer + round, epoch), so callers that
// pass different `first_layer`s get independent orders.
inline uint64_t permuted_index(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch, uint32_t first_layer) {
  if (n <= 1) return 0;
  const int half = (std::max(2, int(std::bit_width(n - 1))) + 1) / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  uint64_t x = i;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint32_t round = 0; round < 6; ++round) {
      const auto f = philox4x32(seed, rng_stream(RngPurpose::data, first_layer + round, epoch), right);
      const uint64_t next = left ^ ((uint64_t(f[0]) << 32 | f[1]) & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

}  // namespace kiln
