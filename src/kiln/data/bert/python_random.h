// data/bert/python_random.h — CPython's random.Random for integer seeds, draw for draw: the
// MT19937 of Modules/_randommodule.c seeded by init_by_array with the seed's 32-bit words, and
// Lib/random.py's random(), getrandbits(), randint() (rejection on getrandbits of n's bit
// length) and shuffle(). The reference create_pretraining_data.py draws from this generator.
#pragma once
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln::data {

class PythonRandom {
 public:
  // random.Random(seed) for a non-negative integer seed.
  explicit PythonRandom(uint64_t seed);

  uint32_t next_u32() {
    if (index_ >= kN) refill();
    uint32_t y = state_[size_t(index_++)];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    return y ^ (y >> 18);
  }

  // random(): 53 bits from two draws, in [0, 1).
  double random() {
    const uint32_t a = next_u32() >> 5, b = next_u32() >> 6;
    return (double(a) * 67108864.0 + double(b)) * (1.0 / 9007199254740992.0);
  }

  // getrandbits(k) for 0 <= k <= 64: 32-bit words from the least significant, the last one
  // keeping its top bits.
  uint64_t getrandbits(int k) {
    if (k == 0) return 0;
    if (k <= 32) return next_u32() >> (32 - k);
    const uint64_t low = next_u32();
    return low | (uint64_t(next_u32() >> (64 - k)) << 32);
  }

  // _randbelow(n), n >= 1.
  uint64_t randbelow(uint64_t n) {
    const int k = std::bit_width(n);
    uint64_t r = getrandbits(k);
    while (r >= n) r = getrandbits(k);
    return r;
  }

  // randint(a, b): uniform in [a, b], both inclusive; a <= b.
  int64_t randint(int64_t a, int64_t b) { return a + int64_t(randbelow(uint64_t(b - a) + 1)); }

  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i-- > 1;) std::swap(v[i], v[size_t(randbelow(i + 1))]);
  }

 private:
  static constexpr int kN = 624;
  void refill();

  std::array<uint32_t, kN> state_{};
  int index_ = kN;
};

}  // namespace kiln::data
