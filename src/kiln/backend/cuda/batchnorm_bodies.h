// backend/cuda/batchnorm_bodies.h — bodies of the CUDA batch-norm kernels over NHWC rows (elementwise_bodies.h
// says how they run). Channel sums follow the CPU backend (backend/cpu/batchnorm.cc) exactly:
// rows cut into the same chunks and f32 runs (backend/bn_sums.h), one double partial sum per
// (chunk, channel) item, the chunks added in order per channel — so the statistics match it bit
// for bit, without atomics.
// Per-channel coefficients are computed once per channel, then applied per element.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/bn_sums.h"
#include "kiln/backend/cuda/hd_types.h"

namespace kiln::ops::cuda {

// g = dy where the fused ReLU let the output through, else 0.
KILN_HD inline float bn_grad(const FloatPtr& y, const FloatPtr& dy, int64_t i, bool relu) {
  return relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
}

// What a partial-sum pass adds per row and channel (K = 1, 1, 2 and 2 values).
enum class BnSum : uint8_t {
  x,           // Σ x (SyncBN)
  deviations,  // Σ (x - sum / total_rows)², sum the f64 channel sums (SyncBN)
  backward,    // Σ g and Σ g (x - mean)
  shifted,     // Σ d and Σ d², d = x - mean, `mean` the shift of BnShiftBody (one-process forward)
};

// The number of values a pass of this kind sums per channel.
KILN_HD inline int bn_sums_per_channel(BnSum what) {
  return what == BnSum::backward || what == BnSum::shifted ? 2 : 1;
}

// Item = chunk b * C + c: partial[(b * K + k) * C + c] = channel c's sums over the chunk's rows.
struct BnPartialBody {
  BnSum what;
  FloatPtr x, y, dy;        // y, dy: backward only
  const double* sum;        // deviations only
  const float* mean;        // backward: the mean; shifted: the shift
  int64_t rows, C, total_rows;
  bool relu;
  double* partial;
  // Adds row r's terms of channel c to t0 (and t1); m: the mean of the deviations pass.
  KILN_HD void add_terms(int64_t r, int64_t c, float m, float& t0, float& t1) const {
    const int64_t i = r * C + c;
    if (what == BnSum::x) {
      t0 += x[i];
    } else if (what == BnSum::deviations) {
      const float d = x[i] - m;
      t0 += d * d;
    } else if (what == BnSum::shifted) {
      const float d = x[i] - mean[c];
      t0 += d;
      t1 += d * d;
    } else {
      const float g = bn_grad(y, dy, i, relu);
      t0 += g;
      t1 += g * (x[i] - mean[c]);
    }
  }
  KILN_HD void operator()(int64_t item) const {
    const int64_t b = item / C, c = item % C, chunk = bn_chunk_rows(rows);
    const int64_t end = (b + 1) * chunk < rows ? (b + 1) * chunk : rows;
    const int K = bn_sums_per_channel(what);
    const float m = what == BnSum::deviations ? float(sum[c] / double(total_rows)) : 0.0f;
    double s0 = 0.0, s1 = 0.0;
    for (int64_t r0 = b * chunk; r0 < end; r0 += kBnFloatRun) {
      const int64_t run_end = r0 + kBnFloatRun < end ? r0 + kBnFloatRun : end;
      float run0 = 0.0f, run1 = 0.0f;
      for (int64_t r = r0; r < run_end;) {
        const int64_t n = r + kBnGroup <= run_end ? kBnGroup : 1;
        float g0 = 0.0f, g1 = 0.0f;
        for (int64_t k = 0; k < n; ++k) add_terms(r + k, c, m, g0, g1);
        run0 += g0, run1 += g1, r += n;
      }
      s0 += run0, s1 += run1;
    }
    partial[(b * K) * C + c] = s0;
    if (K == 2) partial[(b * K + 1) * C + c] = s1;
  }
};

// Item j < K * C: out[j] = Σ_b partial[b * K * C + j], in chunk order.
struct BnCombineBody {
  const double* partial;
  int64_t chunks, width;  // width = K * C
  double* out;
  KILN_HD void operator()(int64_t j) const {
    double s = 0.0;
    for (int64_t b = 0; b < chunks; ++b) s += partial[b * width + j];
    out[j] = s;
  }
};

// Item c: shift[c] = the mean of channel c over the sampled rows, summed in f32 in row order (the
// CPU backend's sampled_mean).
struct BnShiftBody {
  FloatPtr x;
  int64_t rows, C;
  float* shift;
  KILN_HD void operator()(int64_t c) const {
    const int64_t every = bn_shift_step(rows);
    float s = 0.0f;
    for (int64_t r = 0; r < rows; r += every) s += x[r * C + c];
    shift[c] = s / float(bn_shift_samples(rows));
  }
};

// Item c: mean and biased var from the shifted sums s (Σ d, then Σ d² per channel).
struct BnShiftedStatsBody {
  const float* shift;
  const double* s;
  int64_t rows, C;
  float* mean;
  float* var;
  KILN_HD void operator()(int64_t c) const {
    const double m = s[c] / double(rows), v = s[C + c] / double(rows) - m * m;
    mean[c] = float(double(shift[c]) + m);
    var[c] = float(v > 0.0 ? v : 0.0);
  }
};

// Item c: mean = sum / rows, var = squares / rows (biased; SyncBN).
struct BnStatsBody {
  const double* sum;
  const double* squares;
  int64_t rows;
  float* mean;
  float* var;
  KILN_HD void operator()(int64_t c) const {
    mean[c] = float(sum[c] / double(rows));
    var[c] = float(squares[c] / double(rows));
  }
};

// Item c: the forward's y = x a + b, a = gamma rstd, b = beta - mean gamma rstd.
struct BnForwardCoefBody {
  const float* gamma;
  const float* beta;
  const float* mean;
  const float* var;
  float eps;
  float* a;
  float* b;
  KILN_HD void operator()(int64_t c) const {
    const double rstd = 1.0 / sqrt(double(var[c]) + eps);
    a[c] = float(gamma[c] * rstd);
    b[c] = float(beta[c] - mean[c] * (gamma[c] * rstd));
  }
};

// Item i = element: y = x a + b per channel, + r (a ResNet block's join) where r is not null,
// max(., 0) with relu.
struct BnNormalizeBody {
  FloatPtr x, y, r;
  const float* a;
  const float* b;
  int64_t C;
  bool relu;
  KILN_HD void operator()(int64_t i) const {
    float v = x[i] * a[i % C] + b[i % C];
    if (r.p) v += r[i];
    y.set(i, relu && v < 0.0f ? 0.0f : v);
  }
};

// Item c: dbeta += Σ g, dgamma += Σ g (x - mean) rstd from this rank's sums `local`, and the dx
// coefficients k = gamma rstd, u = Σ g / total_rows, v = Σ g (x - mean) rstd² / total_rows from
// the sums over every rank (`global`; u = v = 0 for eval statistics).
struct BnBackwardCoefBody {
  const float* gamma;
  const float* var;
  float eps;
  bool training;
  const double* local;
  const double* global;
  int64_t C, total_rows;
  float* dgamma;
  float* dbeta;
  float* k;  // k, u, v: C each
  KILN_HD void operator()(int64_t c) const {
    const double rstd = 1.0 / sqrt(double(var[c]) + eps);
    dbeta[c] += float(local[c]);
    dgamma[c] += float(local[C + c] * rstd);
    k[c] = float(gamma[c] * rstd);
    k[C + c] = training ? float(global[c] / double(total_rows)) : 0.0f;
    k[2 * C + c] = training ? float(global[C + c] * rstd * rstd / double(total_rows)) : 0.0f;
  }
};

// Item i = element: dx = k (g - u - (x - mean) v) per channel.
struct BnBackwardDxBody {
  FloatPtr x, y, dy, dx;
  const float* mean;
  const float* k;
  int64_t C;
  bool relu;
  KILN_HD void operator()(int64_t i) const {
    const int64_t c = i % C;
    dx.set(i, k[c] * (bn_grad(y, dy, i, relu) - k[C + c] - (x[i] - mean[c]) * k[2 * C + c]));
  }
};

// Item c: PyTorch's running statistics; item 0 also counts the batch.
struct BnRunningBody {
  const float* mean;
  const float* var;
  float momentum, unbias;
  float* running_mean;
  float* running_var;
  float* count;
  KILN_HD void operator()(int64_t c) const {
    running_mean[c] = bn_running_average(running_mean[c], mean[c], momentum);
    running_var[c] = bn_running_average(running_var[c], var[c] * unbias, momentum);
    if (c == 0) count[0] += 1.0f;
  }
};

}  // namespace kiln::ops::cuda
