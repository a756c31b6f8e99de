// backend/cuda/bodies_rows.h — per-row and per-column bodies of the CUDA backend's own kernels
// (bodies.h says how they run): softmax backward, BERT's masked attention softmax, LayerNorm
// backward, bias gradients, embedding gathers and the deterministic scatter-add. Column sums
// walk the rows in order in double, as the CPU backend does, so they match it bit for bit.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/hd_types.h"

namespace kiln::ops::cuda {

// Item r = row r of cols: dx = scale y (dy - Σ dy y); dx may alias dy.
struct SoftmaxBackwardRowBody {
  FloatPtr y, dy, dx;
  int64_t cols;
  float scale;
  KILN_HD void operator()(int64_t r) const {
    const int64_t o = r * cols;
    float dot = 0.0f;
    for (int64_t c = 0; c < cols; ++c) dot += y[o + c] * dy[o + c];
    for (int64_t c = 0; c < cols; ++c) dx.set(o + c, scale * y[o + c] * (dy[o + c] - dot));
  }
};

// Item r = row r of scores (B, heads, Sq, Sk) viewed as rows of Sk: the softmax of the scores
// plus -10000 on the keys that mask (B, Sk) marks 0; probs may alias scores.
struct AttentionSoftmaxRowBody {
  FloatPtr scores, probs;
  const int32_t* mask;
  int64_t per_batch, Sk;  // per_batch = heads * Sq rows share one mask row
  KILN_HD float score(const int32_t* m, int64_t o, int64_t k) const {
    return scores[o + k] + (m[k] ? 0.0f : -10000.0f);
  }
  KILN_HD void operator()(int64_t r) const {
    const int32_t* m = mask + (r / per_batch) * Sk;
    const int64_t o = r * Sk;
    float mx = -INFINITY;
    for (int64_t k = 0; k < Sk; ++k) mx = fmaxf(mx, score(m, o, k));
    float sum = 0.0f;
    for (int64_t k = 0; k < Sk; ++k) sum += expf(score(m, o, k) - mx);
    const float inv = 1.0f / sum;
    for (int64_t k = 0; k < Sk; ++k) probs.set(o + k, expf(score(m, o, k) - mx) * inv);
  }
};

// Item r = row r of C: dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w and
// xhat = (x - mean) rstd; with accumulate, dx += that. dx may alias dy.
struct LayerNormBackwardRowBody {
  FloatPtr x, dy, w, dx;
  const float* mean;
  const float* rstd;
  int64_t C;
  bool accumulate;
  KILN_HD void operator()(int64_t r) const {
    const int64_t o = r * C;
    const float m = mean[r], s = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float g = dy[o + c] * w[c];
      sum_g += g;
      sum_gx += g * (x[o + c] - m) * s;
    }
    const float mg = sum_g / float(C), mgx = sum_gx / float(C);
    for (int64_t c = 0; c < C; ++c) {
      const float d = s * (dy[o + c] * w[c] - mg - (x[o + c] - m) * s * mgx);
      dx.set(o + c, accumulate ? dx[o + c] + d : d);
    }
  }
};

// Item c = column c of (N, C): dw[c] += Σ_r dy xhat and db[c] += Σ_r dy, in backend.h's order
// (f32 within chunks of kLayerNormGradRows rows, double across them): the CPU backend's sums.
struct LayerNormParamGradBody {
  FloatPtr x, dy;
  const float* mean;
  const float* rstd;
  float* dw;
  float* db;
  int64_t N, C;
  KILN_HD void operator()(int64_t c) const {
    double acc_w = 0.0, acc_b = 0.0;
    for (int64_t r0 = 0; r0 < N; r0 += kLayerNormGradRows) {
      const int64_t r1 = r0 + kLayerNormGradRows < N ? r0 + kLayerNormGradRows : N;
      float chunk_w = 0.0f, chunk_b = 0.0f;
      for (int64_t r = r0; r < r1; ++r) {
        const float g = dy[r * C + c];
        chunk_w += g * ((x[r * C + c] - mean[r]) * rstd[r]);
        chunk_b += g;
      }
      acc_w += chunk_w;
      acc_b += chunk_b;
    }
    dw[c] += float(acc_w);
    db[c] += float(acc_b);
  }
};

// Item c = column c of dy (N, C): db[c] += Σ_r dy, in double in row order.
struct BiasGradBody {
  FloatPtr dy;
  float* db;
  int64_t N, C;
  KILN_HD void operator()(int64_t c) const {
    double acc = 0.0;
    for (int64_t r = 0; r < N; ++r) acc += dy[r * C + c];
    db[c] += float(acc);
  }
};

// Item i = element i of out (n, dim): out row r = table (num, dim) row ids[r] - first, zero
// where that row lies outside the table.
struct GatherBody {
  FloatPtr table, out;
  const int32_t* ids;
  int64_t num, dim, first;
  KILN_HD void operator()(int64_t i) const {
    const int64_t r = i / dim, c = i % dim, row = ids[r] - first;
    out.set(i, row >= 0 && row < num ? table[row * dim + c] : 0.0f);
  }
};

// Item k = (column c, class q) with k = q * dim + c: adds dy row i (n, dim) into dtable (num, dim)
// row ids[i] - first for the i in order whose destination row is ≡ q mod `classes` (rows outside
// the table are skipped). Each destination element
// is owned by one item and receives its rows in the order of i, so the sums are deterministic
// and the CPU backend's bit for bit, without atomics; the classes spread the work.
struct ScatterAddBody {
  FloatPtr dy, dtable;
  const int32_t* ids;
  int64_t n, num, dim, first, classes;
  KILN_HD void operator()(int64_t k) const {
    const int64_t c = k % dim, q = k / dim;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = ids[i] - first;
      if (row < 0 || row >= num || row % classes != q) continue;
      dtable.set(row * dim + c, dtable[row * dim + c] + dy[i * dim + c]);
    }
  }
};

}  // namespace kiln::ops::cuda
