// data/megatron/numpy_random.h — numpy's legacy RandomState (MT19937) for the draws Megatron's
// BERT dataset makes, so kiln builds the same samples: random(), randint(low, high),
// shuffle() of a list, and choice(p). Checked against numpy 1.24 in tests.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace kiln::data::megatron {

class NumpyRandomState {
 public:
  // numpy seeds MT19937 with init_genrand(seed), which is what std::mt19937(seed) does.
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t next_u32() { return uint32_t(mt_()); }

  // random_sample(): 53 bits from two 32-bit draws.
  double random() {
    const uint32_t a = next_u32() >> 5, b = next_u32() >> 6;
    return (double(a) * 67108864.0 + double(b)) / 9007199254740992.0;
  }

  // Uniform in [0, max] by masked rejection on 32-bit draws (numpy's random_interval and the
  // masked path of bounded ints); max < 2^32.
  uint32_t interval(uint32_t max) {
    if (max == 0) return 0;
    uint32_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t v;
    while ((v = next_u32() & mask) > max) {
    }
    return v;
  }

  // randint(low, high): uniform in [low, high), high - low <= 2^32. No draw when high - low == 1.
  int64_t randint(int64_t low, int64_t high) {
    const uint64_t range = uint64_t(high - low - 1);
    if (range == 0) return low;
    if (range == 0xFFFFFFFFull) return low + int64_t(next_u32());
    return low + int64_t(interval(uint32_t(range)));
  }

  // shuffle(list): Fisher-Yates from the end.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[interval(uint32_t(i - 1))]);
  }

  // choice(len(cdf), p) given cdf = cumsum(p) / cumsum(p)[-1]: searchsorted(cdf, random(), 'right').
  size_t choice(std::span<const double> cdf) {
    const double u = random();
    size_t k = 0;
    while (k < cdf.size() && cdf[k] <= u) ++k;
    return k;
  }

 private:
  std::mt19937 mt_;
};

}  // namespace kiln::data::megatron
