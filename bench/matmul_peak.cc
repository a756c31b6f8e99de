// bench/matmul_peak.cc — the machine's measured matrix-product peak through kiln's op table
// (oneDNN): a 2048^3 product in f32 and in bf16 (f32 in and out, bf16 operands), median of 7
// runs after 2 warm-ups. The denominator for kiln's "% of peak" (BENCHMARKING.md §3).
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/philox.h"
#include "kiln/core/timer.h"

int main() {
  const int64_t n = 2048;
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
  const kiln::RngStream rng{1, kiln::rng_stream(kiln::RngPurpose::test, 0, 0)};
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = rng.uniform(2 * i) - 0.5f;
    b[i] = rng.uniform(2 * i + 1) - 0.5f;
  }
  for (kiln::DType dtype : {kiln::DType::f32, kiln::DType::bf16}) {
    kiln::ops::set_matmul_dtype(dtype);
    std::vector<double> seconds;
    for (int run = 0; run < 9; ++run) {
      kiln::Timer timer;
      kiln::ops::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      if (run >= 2) seconds.push_back(timer.seconds());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    fmt::print("matmul {}^3 {}: {:.1f} ms, {:.1f} GFLOP/s\n", n, kiln::dtype_name(dtype), median * 1e3,
               2.0 * double(n * n * n) / median / 1e9);
  }
}
