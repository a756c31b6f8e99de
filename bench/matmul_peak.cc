// bench/matmul_peak.cc — the machine's measured matrix-product peak through kiln's op table
// (oneDNN): a 2048^3 product with f32 operands and with bf16 operands (f32 out), median of 7
// runs after 2 warm-ups. The denominator for kiln's "% of peak" (BENCHMARKING.md §3).
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/philox.h"
#include "kiln/core/timer.h"

int main() {
  using namespace kiln;
  const int64_t n = 2048;
  Context& ctx = cpu_context();
  Tensor a32 = Tensor::empty({n, n}), b32 = Tensor::empty({n, n}), c = Tensor::empty({n, n});
  const RngStream rng{1, rng_stream(RngPurpose::test, 0, 0)};
  for (int64_t i = 0; i < n * n; ++i) {  // host-side setup
    a32.ptr<float>()[i] = rng.uniform(2 * i) - 0.5f;
    b32.ptr<float>()[i] = rng.uniform(2 * i + 1) - 0.5f;
  }
  for (DType dtype : {DType::f32, DType::bf16}) {
    Tensor a = Tensor::empty({n, n}, dtype), b = Tensor::empty({n, n}, dtype);
    ops::cast(ctx, a32, a);
    ops::cast(ctx, b32, b);
    std::vector<double> seconds;
    for (int run = 0; run < 9; ++run) {
      Timer timer;
      ops::matmul(ctx, ops::mat(a), ops::mat(b), ops::mat(c));
      if (run >= 2) seconds.push_back(timer.seconds());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    fmt::print("matmul {}^3 {}: {:.1f} ms, {:.1f} GFLOP/s\n", n, dtype_name(dtype), median * 1e3,
               2.0 * double(n * n * n) / median / 1e9);
  }
}
