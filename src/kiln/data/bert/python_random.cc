#include "kiln/data/bert/python_random.h"

#include <algorithm>

namespace kiln::data {
namespace {

constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpper = 0x80000000U, kLower = 0x7fffffffU;

}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  // The seed's 32-bit words from the least significant; zero is one word.
  std::vector<uint32_t> key{uint32_t(seed)};
  if (seed >> 32) key.push_back(uint32_t(seed >> 32));

  // init_genrand(19650218), then init_by_array(key).
  state_[0] = 19650218U;
  for (uint32_t i = 1; i < kN; ++i) state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + i;
  size_t i = 1, j = 0;
  for (size_t k = std::max<size_t>(kN, key.size()); k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525U)) + key[j] + uint32_t(j);
    if (++i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
    if (++j >= key.size()) j = 0;
  }
  for (size_t k = kN - 1; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941U)) - uint32_t(i);
    if (++i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
  }
  state_[0] = 0x80000000U;
  index_ = kN;
}

void PythonRandom::refill() {
  const auto twist = [](uint32_t upper, uint32_t lower, uint32_t far) {
    const uint32_t y = (upper & kUpper) | (lower & kLower);
    return far ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  };
  int k = 0;
  for (; k < kN - kM; ++k) state_[size_t(k)] = twist(state_[size_t(k)], state_[size_t(k + 1)], state_[size_t(k + kM)]);
  for (; k < kN - 1; ++k)
    state_[size_t(k)] = twist(state_[size_t(k)], state_[size_t(k + 1)], state_[size_t(k + kM - kN)]);
  state_[kN - 1] = twist(state_[kN - 1], state_[0], state_[kM - 1]);
  index_ = 0;
}

}  // namespace kiln::data
