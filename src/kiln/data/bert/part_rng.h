// data/bert/part_rng.h — the sequential random source of one data-preparation part:
// Philox keyed by (seed, stream), so a part's output depends only on the seed and its index,
// never on which worker thread ran it. Draws mirror Python's random (random/randint/shuffle).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/core/philox.h"

namespace kiln::data {

class PartRng {
 public:
  PartRng(uint64_t seed, uint64_t stream) : stream_{seed, stream} {}

  uint64_t next_u64() {
    if (have_ == 0) {
      buffer_ = stream_.block(counter_++);
      have_ = 2;
    }
    const int k = 2 - have_--;
    return (uint64_t(buffer_[2 * k]) << 32) | buffer_[2 * k + 1];
  }
  // Uniform in [0, 1) with 53 random bits.
  double random() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform integer in [lo, hi], both inclusive like Python's randint.
  int64_t randint(int64_t lo, int64_t hi) {
    const uint64_t n = uint64_t(hi - lo) + 1;
    return lo + int64_t((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
  }
  // Fisher-Yates from the back, as Python's shuffle.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(randint(0, int64_t(i) - 1))]);
  }

 private:
  RngStream stream_;
  uint64_t counter_ = 0;
  std::array<uint32_t, 4> buffer_{};
  int have_ = 0;
};

}  // namespace kiln::data
