// backend/cuda/rows_bodies.h — per-row and per-column bodies of the CUDA backend's own kernels
// (elementwise_bodies.h says how they run): softmax forward and backward, BERT's masked attention softmax, bias
// gradients, embedding gathers and the deterministic scatter-add. Column sums
// walk the rows in order in double, as the CPU backend does, so they match it bit for bit.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/hd_types.h"

namespace kiln::ops::cuda {

// Softmax rows (softmax_forward, BERT's masked attention softmax, softmax_backward) in three
// launches, as LayerNorm's: kRowLanes lanes per row, then one item per row to combine its lanes in
// lane order, then one item per element. One thread per row left a GPU mostly idle and read
// memory one row apart per neighbouring thread.

// The scores of a softmax row: x, plus -10000 on the keys that mask (B, cols) marks 0 when there is
// a mask (per_batch rows, heads x Sq, share one mask row).
struct SoftmaxScores {
  FloatPtr x;
  const int32_t* mask;  // nullptr: a plain softmax
  int64_t per_batch, cols;
  KILN_HD float operator()(int64_t i) const {
    const float z = x[i];
    if (!mask) return z;
    const int64_t r = i / cols;
    return mask[(r / per_batch) * cols + i % cols] ? z : z - 10000.0f;
  }
};

// Item = lane of a row (item = r * kRowLanes + l): the lane's maximum score (-inf for a lane
// without elements) and Σ exp(score - that maximum) over its elements.
struct SoftmaxLaneBody {
  SoftmaxScores scores;
  float* partial;  // 2 per item
  KILN_HD void operator()(int64_t item) const {
    const int64_t cols = scores.cols, o = (item / kRowLanes) * cols;
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t c = item % kRowLanes; c < cols; c += kRowLanes) mx = fmaxf(mx, scores(o + c));
    for (int64_t c = item % kRowLanes; c < cols; c += kRowLanes) sum += expf(scores(o + c) - mx);
    partial[2 * item] = mx;
    partial[2 * item + 1] = sum;
  }
};

// Item r: the row's maximum and 1 / Σ exp(score - maximum), from its lanes in lane order.
struct SoftmaxRowStatsBody {
  const float* partial;
  float* stats;  // 2 per row
  KILN_HD void operator()(int64_t r) const {
    const float* lane = partial + 2 * r * kRowLanes;
    float mx = -INFINITY;
    for (int64_t l = 0; l < kRowLanes; ++l) mx = fmaxf(mx, lane[2 * l]);
    float sum = 0.0f;
    for (int64_t l = 0; l < kRowLanes; ++l)
      if (lane[2 * l + 1] > 0.0f) sum += lane[2 * l + 1] * expf(lane[2 * l] - mx);
    stats[2 * r] = mx;
    stats[2 * r + 1] = 1.0f / sum;
  }
};

// Item i: y = exp(score - max) / Σ. y may alias x.
struct SoftmaxApplyBody {
  SoftmaxScores scores;
  FloatPtr y;
  const float* stats;
  KILN_HD void operator()(int64_t i) const {
    const int64_t r = i / scores.cols;
    y.set(i, expf(scores(i) - stats[2 * r]) * stats[2 * r + 1]);
  }
};

// Item = lane of a row: partial[item] = Σ y dy over its elements, in double.
struct SoftmaxBackwardLaneBody {
  FloatPtr y, dy;
  int64_t cols;
  double* partial;
  KILN_HD void operator()(int64_t item) const {
    const int64_t o = (item / kRowLanes) * cols;
    double dot = 0.0;
    for (int64_t c = item % kRowLanes; c < cols; c += kRowLanes) dot += double(y[o + c]) * double(dy[o + c]);
    partial[item] = dot;
  }
};

// Item r: sum[r] = row r's lanes' partial sums, added in lane order.
struct LaneSumBody {
  const double* partial;
  double* sum;
  KILN_HD void operator()(int64_t r) const {
    double s = 0.0;
    for (int64_t l = 0; l < kRowLanes; ++l) s += partial[r * kRowLanes + l];
    sum[r] = s;
  }
};

// Item i: dx = scale y (dy - Σ dy y). dx may alias dy.
struct SoftmaxBackwardApplyBody {
  FloatPtr y, dy, dx;
  const double* dot;
  int64_t cols;
  float scale;
  KILN_HD void operator()(int64_t i) const {
    dx.set(i, scale * y[i] * float(double(dy[i]) - dot[i / cols]));
  }
};

// Item k C + c: partial[k C + c] = Σ dy over rows [k R, (k + 1) R) of column c (R = kBiasGradRows),
// in double in row order.
struct BiasGradChunkBody {
  FloatPtr dy;
  double* partial;
  int64_t N, C;
  KILN_HD void operator()(int64_t item) const {
    const int64_t k = item / C, c = item % C, r0 = k * kBiasGradRows;
    const int64_t r1 = r0 + kBiasGradRows < N ? r0 + kBiasGradRows : N;
    double acc = 0.0;
    for (int64_t r = r0; r < r1; ++r) acc += dy[r * C + c];
    partial[item] = acc;
  }
};

// Item c: db[c] += the column's chunk sums, added in chunk order.
struct BiasGradCombineBody {
  const double* partial;
  float* db;
  int64_t chunks, C;
  KILN_HD void operator()(int64_t c) const {
    double acc = 0.0;
    for (int64_t k = 0; k < chunks; ++k) acc += partial[k * C + c];
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
