// io/finite_check.cc — the NaN / Inf check of io/finite_check.h.
#include "kiln/io/finite_check.h"

#include <cmath>
#include <utility>

#include "kiln/core/dtype.h"
#include "kiln/core/error.h"

namespace kiln::io {
namespace {

// The first non-finite element (-1: none) and how many there are; `value(i)` reads element i as
// a double.
template <typename Value>
std::pair<int64_t, int64_t> non_finite(int64_t n, Value value) {
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(value(i))) continue;
    if (first < 0) first = i;
    ++count;
  }
  return {first, count};
}

template <typename Value>
void check(int64_t n, Value value, const std::string& file, const std::string& name) {
  const auto [first, count] = non_finite(n, value);
  if (first < 0) return;
  throw Error("{}: tensor '{}' holds {} at element {} ({} of {} values are not finite); --allow-non-finite loads it "
              "anyway", file, name, std::isnan(value(first)) ? "NaN" : value(first) > 0 ? "Inf" : "-Inf", first,
              count, n);
}

}  // namespace

void check_finite(const float* values, int64_t n, const std::string& file, const std::string& name) {
  check(n, [values](int64_t i) { return double(values[i]); }, file, name);
}

void check_finite(const Tensor& t, const std::string& file, const std::string& name) {
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::f32: return check_finite(t.ptr<float>(), n, file, name);
    case DType::f64: return check(n, [p = t.ptr<double>()](int64_t i) { return p[i]; }, file, name);
    case DType::f16:
      return check(n, [p = t.ptr<uint16_t>()](int64_t i) { return double(f16_to_f32(p[i])); }, file, name);
    case DType::bf16:
      return check(n, [p = t.ptr<uint16_t>()](int64_t i) { return double(bf16_to_f32(p[i])); }, file, name);
    default: return;
  }
}

}  // namespace kiln::io
