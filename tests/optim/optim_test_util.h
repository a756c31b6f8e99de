// tests/optim/optim_test_util.h — a small two-parameter store and random gradients for optimizer tests.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/nn/params.h"
#include "kiln/core/philox.h"

namespace kiln::optim::test {

// "dense.weight" (4, 5) with decay and random values; "dense.bias" (7) without decay, all zero, so
// LAMB's first step on it takes the ‖w‖ = 0 branch (ratio 1).
inline void make_store(ParamStore& store, int64_t weight_cols = 5) {
  store.add("dense.weight", {4, weight_cols}, true);
  store.add("dense.bias", {7}, false);
  store.allocate();
  const RngStream rng{42, rng_stream(RngPurpose::test, 0, 0)};
  const ParamSpec& w = store.specs()[0];
  for (int64_t i = 0; i < w.numel; ++i) store.host_values()[size_t(w.offset + i)] = 0.5f * rng.normal(uint64_t(i));
}

// Fresh random gradients for step `step` in every parameter slice.
inline void fill_grads(ParamStore& store, int64_t step) {
  const RngStream rng{7, rng_stream(RngPurpose::test, 1, uint64_t(step))};
  for (const ParamSpec& s : store.specs())
    for (int64_t i = 0; i < s.numel; ++i)
      store.host_grads()[size_t(s.offset + i)] = 0.1f * rng.normal(uint64_t(s.offset + i));
}

inline std::vector<double> to_double(const float* x, int64_t n) { return std::vector<double>(x, x + n); }

}  // namespace kiln::optim::test
