// tests/backend/random_fill.h — reproducible random test inputs and error measures.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/core/philox.h"

namespace kiln::testing {

// n standard-normal values (times `scale`) from test stream `id`.
inline std::vector<float> random_normal(int64_t n, uint32_t id, float scale = 1.0f) {
  const RngStream rng{1234, rng_stream(RngPurpose::test, id, 0)};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * rng.normal(uint64_t(i));
  return v;
}

// max |got - want| / max |want|: the error relative to the size of the reference.
template <typename A, typename B>
double max_rel_error(const A& got, const B& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - double(want[i])));
    ref = std::max(ref, std::abs(double(want[i])));
  }
  return err / std::max(ref, 1e-30);
}

}  // namespace kiln::testing
