// backend/cuda/bodies_rows.h — per-row and per-column bodies of the CUDA backend's own kernels
// (bodies.h says how they run): softmax backward, BERT's masked attention softmax, bias
// gradients, embedding gathers and the deterministic scatter-add. Column sums
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
