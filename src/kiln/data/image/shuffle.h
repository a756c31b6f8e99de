// data/image/shuffle.h — the image loader's per-epoch permutation computed per index.
#pragma once
#include <cstdint>

#include "kiln/core/permutation.h"

namespace kiln::data {

// A bijection on [0, n) that is a pure function of (seed, epoch); see permuted_index.
inline uint64_t shuffled_index(uint64_t i, uint64_t n, uint64_t seed, uint64_t epoch) {
  return permuted_index(i, n, seed, epoch, 300);
}

}  // namespace kiln::data
