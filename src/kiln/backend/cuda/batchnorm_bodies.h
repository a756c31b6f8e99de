// backend/cuda/batchnorm_bodies.h — bodies of the CUDA batch-norm kernels over NHWC rows (elementwise_bodies.h
// says how they run). Channel sums follow the CPU backend (backend/cpu/batchnorm.cc) exactly:
// rows cut into the same chunks and f32 runs (backend/bn_sums.h), the runs added in order into
// one double partial per chunk, the chunks added in order per channel — so the statistics match
// it bit for bit, without atomics, whatever the grid.
// Per-channel coefficients are computed once per channel, then applied per element.
//
// A channel pass is three launches (batchnorm.cc's channel_pass), each item's order fixed:
// - runs, item (run j, channel c) = j C + c: the f32 sums of the run's (at most kBnFloatRun) rows,
//   K of them (Σ g and Σ g (x - mean) for the backward). A warp reads 32 neighbouring channels
//   of a row. This is the pass that reads the activations, and it has rows / 64 x C items:
//   ResNet-50 batch 256's stem BN (3211264 rows, 64 channels) 3.2M items, its last stage's
//   (12544 rows, 2048 channels) 401K, so every multiprocessor is full. Before, one item per
//   (chunk, channel): at most 256 chunks, the stem's 16384 threads (6% of an H200's 270336)
//   each walking 12544 rows, latency-bound at about a millisecond.
// - chunks, item (chunk b, sum k, channel c): the chunk's run sums in order, in double
//   (ordered_sum), into partial (chunks, K, C). Reads rows / 64 x K x C floats (the stem's
//   backward: 25.7 MB, 1/16 of its bf16 x, y and dy).
// - combine, item (k, c): the chunks' partials in chunk order (at most 256 values, 16 batches of
//   loads).
// Expected at HBM bandwidth on an H200 (4.8 TB/s), the stem's bf16 activations of 411 MB each:
// forward sums (x once) ~90 us, backward sums (x, y, dy) ~260 us, the run sums' write and read
// ~11 us more; H100 (3.35 TB/s) ~1.4x that. The last stage's (12544, 2048): 51 MB, ~11 us / ~32 us.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/bn_sums.h"
#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/ordered_sum.h"

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

// How a pass cuts `rows`: chunks of bn_chunk_rows rows (one double partial each, as on the CPU),
// each cut from its first row into runs of kBnFloatRun rows (one f32 sum each); run j is run
// j % per_chunk of chunk j / per_chunk (the last chunk may have fewer).
struct BnCuts {
  int64_t rows, chunk, chunks, per_chunk;
  // The rows of run j: [begin, end), empty past the last chunk's last run.
  KILN_HD void run_rows(int64_t j, int64_t& begin, int64_t& end) const {
    const int64_t b = j / per_chunk, chunk_end = (b + 1) * chunk < rows ? (b + 1) * chunk : rows;
    begin = b * chunk + (j % per_chunk) * kBnFloatRun;
    end = begin + kBnFloatRun < chunk_end ? begin + kBnFloatRun : chunk_end;
    if (begin > end) begin = end;
  }
  // How many runs chunk b has.
  KILN_HD int64_t runs_of(int64_t b) const {
    const int64_t chunk_end = (b + 1) * chunk < rows ? (b + 1) * chunk : rows;
    return (chunk_end - b * chunk + kBnFloatRun - 1) / kBnFloatRun;
  }
  KILN_HD int64_t runs() const { return chunks * per_chunk; }
};

KILN_HD inline BnCuts bn_cuts(int64_t rows) {
  const int64_t chunk = bn_chunk_rows(rows);
  return {rows, chunk, (rows + chunk - 1) / chunk, (chunk + kBnFloatRun - 1) / kBnFloatRun};
}

// Item = run j * C + c: runs[(j * K + k) * C + c] = the f32 sums of channel c over the run's
// rows, kBnGroup rows at a time, as the CPU adds them.
struct BnRunBody {
  BnSum what;
  FloatPtr x, y, dy;        // (rows, C) each; y, dy: backward only
  const double* sum;        // (C): deviations only
  const float* mean;        // (C): backward: the mean; shifted: the shift
  int64_t rows, C, total_rows;
  bool relu;
  float* runs;              // (runs, K, C)
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
    const int64_t j = item / C, c = item % C;
    int64_t r = 0, end = 0;
    bn_cuts(rows).run_rows(j, r, end);
    const float m = what == BnSum::deviations ? float(sum[c] / double(total_rows)) : 0.0f;
    float run0 = 0.0f, run1 = 0.0f;
    while (r < end) {
      const int64_t n = r + kBnGroup <= end ? kBnGroup : 1;
      float g0 = 0.0f, g1 = 0.0f;
      for (int64_t k = 0; k < n; ++k) add_terms(r + k, c, m, g0, g1);
      run0 += g0, run1 += g1, r += n;
    }
    const int K = bn_sums_per_channel(what);
    runs[(j * K) * C + c] = run0;
    if (K == 2) runs[(j * K + 1) * C + c] = run1;
  }
};

// Item = (chunk b, sum k, channel c) = b * width + k * C + c, width = K * C: partial[item] = the
// chunk's run sums in run order, in double.
struct BnChunkBody {
  const float* runs;  // (runs, K, C)
  BnCuts cuts;
  int64_t width;
  double* partial;    // (chunks, K, C)
  KILN_HD void operator()(int64_t item) const {
    const int64_t b = item / width, kc = item % width;
    const float* first = runs + b * cuts.per_chunk * width + kc;
    partial[item] = ordered_sum(0.0, cuts.runs_of(b), [&](int64_t t) { return double(first[t * width]); });
  }
};

// Item j < K * C: out[j] = Σ_b partial[b * K * C + j], in chunk order.
struct BnCombineBody {
  const double* partial;  // (chunks, K, C)
  int64_t chunks, width;  // width = K * C
  double* out;            // (K, C)
  KILN_HD void operator()(int64_t j) const {
    out[j] = ordered_sum(0.0, chunks, [&](int64_t b) { return partial[b * width + j]; });
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
