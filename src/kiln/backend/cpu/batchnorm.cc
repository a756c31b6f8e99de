// backend/cpu/batchnorm.cc — batch norm over NHWC rows with an optional fused ReLU. Channel sums
// are taken per fixed chunk of rows in double and combined in chunk order, so results do not
// depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/backend/backend.h"

namespace kiln::ops {
namespace {

// Rows per partial sum: depends on `rows` only (at most 256 chunks).
int64_t chunk_rows(int64_t rows) { return std::max<int64_t>(64, (rows + 255) / 256); }

// out[k*C + c] = Σ_r f(r, c)[k] for k < K, accumulated in double. f(r, c, acc) adds its K terms
// into acc[k*C + c].
template <int K, typename F>
void channel_sums(int64_t rows, int64_t C, F f, double* out) {
  const int64_t chunk = chunk_rows(rows);
  const int64_t chunks = (rows + chunk - 1) / chunk;
  // Reused across calls (one per calling thread): a fresh multi-megabyte buffer per call costs
  // page faults on every BatchNorm of every step. Workers see it through `base`, not by name.
  thread_local std::vector<double> partial;
  partial.assign(size_t(chunks * K * C), 0.0);
  double* const base = partial.data();
#pragma omp parallel for schedule(static) if (rows * C > 16384)
  for (int64_t b = 0; b < chunks; ++b) {
    double* acc = base + b * K * C;
    const int64_t end = std::min(rows, (b + 1) * chunk);
    for (int64_t r = b * chunk; r < end; ++r) f(r, acc);
  }
  std::fill(out, out + K * C, 0.0);
  for (int64_t b = 0; b < chunks; ++b)
    for (int64_t i = 0; i < K * C; ++i) out[i] += base[b * K * C + i];
}

// y = max?(x * a + b) per channel.
void scale_shift(const float* x, const float* a, const float* b, int64_t rows, int64_t C,
                 bool relu, float* y) {
#pragma omp parallel for schedule(static) if (rows * C > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    if (relu) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) yr[c] = std::max(xr[c] * a[c] + b[c], 0.0f);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] * a[c] + b[c];
    }
  }
}

void normalize(const float* x, const float* gamma, const float* beta, const float* mean,
               const float* var, int64_t rows, int64_t C, float eps, bool relu, float* y) {
  std::vector<float> a(static_cast<size_t>(C)), b(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const double rstd = 1.0 / std::sqrt(double(var[c]) + eps);
    a[c] = float(gamma[c] * rstd);
    b[c] = float(beta[c] - mean[c] * (gamma[c] * rstd));
  }
  scale_shift(x, a.data(), b.data(), rows, C, relu, y);
}

}  // namespace

void batchnorm_train_forward(const float* x, const float* gamma, const float* beta,
                             int64_t rows, int64_t C, float eps, bool relu, float* y,
                             float* mean, float* var) {
  std::vector<double> s(static_cast<size_t>(C)), m(static_cast<size_t>(C));
  channel_sums<1>(rows, C, [&](int64_t r, double* acc) {
    const float* xr = x + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) acc[c] += xr[c];
  }, s.data());
  for (int64_t c = 0; c < C; ++c) m[c] = s[c] / double(rows);
  // Second pass around the mean: no cancellation in E[x²] - E[x]².
  channel_sums<1>(rows, C, [&](int64_t r, double* acc) {
    const float* xr = x + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const double d = double(xr[c]) - m[c];
      acc[c] += d * d;
    }
  }, s.data());
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = float(m[c]);
    var[c] = float(s[c] / double(rows));
  }
  normalize(x, gamma, beta, mean, var, rows, C, eps, relu, y);
}

void batchnorm_eval_forward(const float* x, const float* gamma, const float* beta,
                            const float* mean, const float* var, int64_t rows, int64_t C,
                            float eps, bool relu, float* y) {
  normalize(x, gamma, beta, mean, var, rows, C, eps, relu, y);
}

void batchnorm_backward(const float* x, const float* y, const float* dy, const float* gamma,
                        const float* mean, const float* var, int64_t rows, int64_t C, float eps,
                        bool relu, bool training, float* dx, float* dgamma, float* dbeta) {
  // With the fused ReLU, the incoming gradient counts only where the output was positive.
  auto g = [=](int64_t i) { return relu && !(y[i] > 0.0f) ? 0.0f : dy[i]; };
  // s[c] = Σ g, s[C + c] = Σ g·(x - mean).
  std::vector<double> s(static_cast<size_t>(2 * C));
  channel_sums<2>(rows, C, [&](int64_t r, double* acc) {
    const float *xr = x + r * C, *yr = y + r * C, *dyr = dy + r * C;
    double *sum_g = acc, *sum_gx = acc + C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const double gi = relu && !(yr[c] > 0.0f) ? 0.0f : dyr[c];
      sum_g[c] += gi;
      sum_gx[c] += gi * (double(xr[c]) - mean[c]);
    }
  }, s.data());

  // dx = k·(g - u - (x - mean)·v) per channel, with u and v zero in eval mode.
  const size_t nc = static_cast<size_t>(C);
  std::vector<float> k(nc), u(nc), v(nc);
  for (int64_t c = 0; c < C; ++c) {
    const double rstd = 1.0 / std::sqrt(double(var[c]) + eps);
    dbeta[c] += float(s[c]);
    dgamma[c] += float(s[C + c] * rstd);
    k[c] = float(gamma[c] * rstd);
    u[c] = training ? float(s[c] / double(rows)) : 0.0f;
    v[c] = training ? float(s[C + c] * rstd * rstd / double(rows)) : 0.0f;
  }
#pragma omp parallel for schedule(static) if (rows * C > 16384)
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = r * C + c;
      dx[i] = k[c] * (g(i) - u[c] - (x[i] - mean[c]) * v[c]);
    }
  }
}

}  // namespace kiln::ops
