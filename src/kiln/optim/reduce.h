// optim/reduce.h — sums over fp32 slices accumulated in double, in an order fixed by the slice length
// alone, so a result does not depend on the thread count.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::optim {

// Elements per partial sum; partials are combined in index order.
inline constexpr int64_t kReduceChunk = 1 << 14;

// Two sums taken in one pass.
struct SumPair {
  double a = 0.0, b = 0.0;
  SumPair& operator+=(const SumPair& o) {
    a += o.a;
    b += o.b;
    return *this;
  }
};

// Σ f(i) for i in [0, n); f returns T (double or SumPair) and is called exactly once per index, so it
// may also update state at i.
template <typename T, typename F>
T deterministic_sum(int64_t n, F&& f) {
  const int64_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<T> partial(size_t(chunks > 0 ? chunks : 1));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = c + 1 == chunks ? n : (c + 1) * kReduceChunk;
    T s{};
    for (int64_t i = c * kReduceChunk; i < end; ++i) s += f(i);
    partial[size_t(c)] = s;
  }
  T total{};
  for (const T& p : partial) total += p;
  return total;
}

// Σ x[i]² over [0, n).
inline double sum_squares(const float* x, int64_t n) {
  return deterministic_sum<double>(n, [x](int64_t i) { return double(x[i]) * double(x[i]); });
}

}  // namespace kiln::optim
