// backend/cuda/losses_bodies.h — bodies of the CUDA softmax cross-entropy kernels (elementwise_bodies.h says
// how they run): per row (over lanes of columns), the log-sum-exp, loss term and hit; the rows'
// totals on the device (the totals the host reads back once) in a fixed tree; per element, the
// gradient; and the vocab-parallel shard parts. Arithmetic as the CPU backend's (backend/cpu/losses.cc).
//
// Where V is a multiple of the span width W (vec_access.h: 8 bf16 / f16, 4 f32; Megatron's padded
// vocabularies are) and the logits (and dlogits, of the same dtype) are 16-byte aligned, the
// passes over the logits run as span bodies (*SpanBody): a lane-group item does W lanes' work
// with one accumulator each (the same lane results), a gradient item a span of one row. HBM
// bytes per logit in bf16 (f32: twice): forward 2 B (max lanes) + 2 B (sumexp lanes; a row is
// 61 KB, read again from HBM) = 4 B; backward 2 + 2 = 4 B; the vocab-parallel parts the same.
// BERT-large's MLM decoder, (1216, 30592) bf16: 149 MB each way, 44 / 31 us at 100% of an H100's
// / H200's HBM, 63 / 44 us at the 70% target.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/ordered_sum.h"
#include "kiln/backend/cuda/vec_access.h"
#include "kiln/backend/xent_norm.h"

namespace kiln::ops::cuda {

// Row i's first argmax and its value.
struct RowMax {
  int64_t at = 0;
  float value = 0.0f;
};
// A row of logits (N, V) is read by kRowLanes lanes, lane l taking columns l, l + kRowLanes, ...
// (neighbouring lanes read neighbouring columns, so a warp's loads coalesce); one item per row then
// combines its lanes in lane order.

// Item = lane l of row i (item = i * kRowLanes + l): the lane's first maximum (at -1 for a lane
// without columns) and Σ z over its columns in double.
struct XentMaxLaneBody {
  FloatPtr logits;
  int64_t V;
  float* lane_max;
  int64_t* lane_at;
  double* lane_zsum;
  KILN_HD void operator()(int64_t item) const {
    const int64_t o = (item / kRowLanes) * V, l = item % kRowLanes;
    RowMax m{-1, 0.0f};
    double zsum = 0.0;
    for (int64_t v = l; v < V; v += kRowLanes) {
      const float z = logits[o + v];
      if (m.at < 0 || z > m.value) m = {v, z};
      zsum += z;
    }
    lane_max[item] = m.value;
    lane_at[item] = m.at;
    lane_zsum[item] = zsum;
  }
};

// XentMaxLaneBody for W lanes per item (item = i (kRowLanes / W) + g: lanes gW .. gW + W - 1).
template <typename T>
struct XentMaxLaneSpanBody {
  static constexpr int W = kSpanWidth<T>, kGroups = int(kRowLanes) / W;
  const T* logits;
  int64_t V;
  float* lane_max;
  int64_t* lane_at;
  double* lane_zsum;
  KILN_HD void operator()(int64_t item) const {
    const int64_t o = (item / kGroups) * V;
    RowMax m[W];
    double zsum[W] = {};
    for (int j = 0; j < W; ++j) m[j] = {-1, 0.0f};
    for (int64_t c = (item % kGroups) * W; c < V; c += kRowLanes) {
      float z[W];
      load_packs<W>(logits + o + c, z);
      for (int j = 0; j < W; ++j) {
        if (m[j].at < 0 || z[j] > m[j].value) m[j] = {c + j, z[j]};
        zsum[j] += z[j];
      }
    }
    for (int j = 0; j < W; ++j) {
      lane_max[item * W + j] = m[j].value;
      lane_at[item * W + j] = m[j].at;
      lane_zsum[item * W + j] = zsum[j];
    }
  }
};

// Row i's first argmax from its lanes' (the lowest column among equal maxima; a NaN in column 0
// stays, as in a scan of the row).
KILN_HD inline RowMax lanes_max(const float* lane_max, const int64_t* lane_at, int64_t i) {
  RowMax m{-1, 0.0f};
  for (int64_t j = i * kRowLanes; j < (i + 1) * kRowLanes; ++j) {
    if (lane_at[j] < 0) continue;
    if (m.at < 0 || lane_max[j] > m.value || (lane_max[j] == m.value && lane_at[j] < m.at))
      m = {lane_at[j], lane_max[j]};
  }
  return m;
}

// Item = lane of row i: Σ exp(z - max_i) over its columns, each difference rounded to f32, the sum
// in double.
struct XentSumexpLaneBody {
  FloatPtr logits;
  int64_t V;
  const float* lane_max;
  const int64_t* lane_at;
  double* lane_sum;
  KILN_HD void operator()(int64_t item) const {
    const int64_t i = item / kRowLanes, o = i * V;
    const float mx = lanes_max(lane_max, lane_at, i).value;
    double sum = 0.0;
    for (int64_t v = item % kRowLanes; v < V; v += kRowLanes) sum += exp(double(logits[o + v] - mx));
    lane_sum[item] = sum;
  }
};

// Σ exp(z - mx) over lanes gW .. gW + W - 1 of a row at o (XentSumexpLaneBody's sums), into
// lane_sum[lane0 .. lane0 + W).
template <int W, typename T>
KILN_HD void sumexp_lanes(const T* logits, int64_t o, int64_t V, int64_t g, float mx, double* lane_sum) {
  double sum[W] = {};
  for (int64_t c = g * W; c < V; c += kRowLanes) {
    float z[W];
    load_packs<W>(logits + o + c, z);
    for (int j = 0; j < W; ++j) sum[j] += exp(double(z[j] - mx));
  }
  for (int j = 0; j < W; ++j) lane_sum[j] = sum[j];
}

// XentSumexpLaneBody for W lanes per item.
template <typename T>
struct XentSumexpLaneSpanBody {
  static constexpr int W = kSpanWidth<T>, kGroups = int(kRowLanes) / W;
  const T* logits;
  int64_t V;
  const float* lane_max;
  const int64_t* lane_at;
  double* lane_sum;
  KILN_HD void operator()(int64_t item) const {
    const int64_t i = item / kGroups;
    const float mx = lanes_max(lane_max, lane_at, i).value;
    sumexp_lanes<W>(logits, i * V, V, item % kGroups, mx, lane_sum + item * W);
  }
};

// Item i = row i: lse[i] from its lanes, and the row's weighted loss term and hit (0 for an
// ignored row, label < 0). A label >= V (the CPU backend throws; here there is no host read)
// makes the row's loss NaN, so the loss the host reads back is NaN rather than a stray read.
struct XentRowBody {
  FloatPtr logits;
  const int32_t* labels;
  const float* weights;  // null: weight 1
  const float* lane_max;
  const int64_t* lane_at;
  const double* lane_zsum;
  const double* lane_sum;
  float* lse;
  double* row_loss;
  int64_t* row_hit;
  int64_t V;
  float smoothing;
  KILN_HD void operator()(int64_t i) const {
    const int64_t y = labels[i];
    const RowMax m = lanes_max(lane_max, lane_at, i);
    double sum = 0.0, zsum = 0.0;
    for (int64_t j = i * kRowLanes; j < (i + 1) * kRowLanes; ++j) sum += lane_sum[j], zsum += lane_zsum[j];
    const float l = float(double(m.value) + log(sum));
    lse[i] = l;
    row_loss[i] = 0.0;
    row_hit[i] = 0;
    if (y < 0) return;
    if (y >= V) {
      row_loss[i] = NAN;
      return;
    }
    const double w = weights ? double(weights[i]) : 1.0, ls = smoothing;
    double term = double(l) - (1.0 - ls) * double(logits[i * V + y]);
    if (ls != 0.0) term -= ls * zsum / double(V);
    row_loss[i] = w * term;
    row_hit[i] = w > 0.0 && m.at == y;
  }
};

// The totals (Σ loss, Σ w, Σ hits) over the rows with a label >= 0, in two launches: one item per
// chunk of kXentTotalRows rows adds them in row order, one item adds the chunks in order. The CPU
// backend adds the rows in one chain: equal up to the rounding of double additions (the hits
// exactly), bit for bit up to kXentTotalRows rows. BERT-large S512 batch 16: 8192 rows (the MLM
// rows, -1 where unmasked), 128 chunks; each launch reads ~200 KB from L2, 4 and 8 batches of
// loads (ordered_sum), a few us each. Before, one thread walked the 8192 rows one load at a time.
inline constexpr int64_t kXentTotalRows = 64;

// Item k: chunk_totals[3 k .. 3 k + 2] = the totals of rows [k R, (k + 1) R), R = kXentTotalRows.
struct XentChunkTotalsBody {
  const int32_t* labels;   // (N)
  const float* weights;    // (N), or null for 1
  const double* row_loss;  // (N)
  const int64_t* row_hit;  // (N)
  int64_t N;
  double* chunk_totals;    // (chunks, 3)
  KILN_HD void operator()(int64_t k) const {
    const int64_t r0 = k * kXentTotalRows, n = N - r0 < kXentTotalRows ? N - r0 : kXentTotalRows;
    // An ignored row adds +0.0, which leaves a sum that starts at +0.0 as it is.
    const auto counted = [&](int64_t t, double v) { return labels[r0 + t] < 0 ? 0.0 : v; };
    chunk_totals[3 * k] = ordered_sum(0.0, n, [&](int64_t t) { return counted(t, row_loss[r0 + t]); });
    chunk_totals[3 * k + 1] =
        ordered_sum(0.0, n, [&](int64_t t) { return counted(t, weights ? double(weights[r0 + t]) : 1.0); });
    chunk_totals[3 * k + 2] = ordered_sum(0.0, n, [&](int64_t t) { return counted(t, double(row_hit[r0 + t])); });
  }
};

// The single item 0: totals (3) = the chunks' totals added in chunk order.
struct XentTotalsBody {
  const double* chunk_totals;  // (chunks, 3)
  int64_t chunks;
  double* totals;
  KILN_HD void operator()(int64_t) const {
    for (int j = 0; j < 3; ++j)
      totals[j] = ordered_sum(0.0, chunks, [&](int64_t k) { return chunk_totals[3 * k + j]; });
  }
};

// The gradient's row factor (backend/xent_norm.h) with the divisor from the forward's totals, 0
// for an ignored row.
KILN_HD inline float xent_factor(int32_t label, const float* weights, int64_t i, float scale,
                                 const double* totals, XentNorm norm) {
  if (label < 0) return 0.0f;
  return xent_row_factor(weights, i, scale, norm.divisor(totals));
}

// Item e = element e of dlogits (N, V): c_i (exp(z - lse_i) - ls/V - (1-ls)[start + v == label_i]).
// Vocab-parallel: the logits are a shard of the vocabulary from column `start` (and no smoothing).
struct XentGradBody {
  FloatPtr logits, dlogits;
  const float* lse;
  const int32_t* labels;
  const float* weights;
  int64_t V;
  float smoothing, scale;
  const double* totals;  // the forward's (3)
  XentNorm norm;
  int64_t start = 0;
  KILN_HD void operator()(int64_t e) const {
    const int64_t i = e / V, v = e % V;
    const int32_t y = labels[i];
    if (y < 0) {
      dlogits.set(e, 0.0f);
      return;
    }
    const float k = xent_factor(y, weights, i, scale, totals, norm);
    float d = k * (expf(logits[e] - lse[i]) - smoothing / float(V));
    if (start + v == y) d -= k * (1.0f - smoothing);
    dlogits.set(e, d);
  }
};

// XentGradBody over spans: item k = elements [k W, k W + W) of one row (V % W == 0). dlogits
// may alias logits.
template <typename T>
struct XentGradSpanBody {
  static constexpr int W = kSpanWidth<T>;
  const T* logits;
  T* dlogits;
  const float* lse;
  const int32_t* labels;
  const float* weights;
  int64_t V;
  float smoothing, scale;
  const double* totals;  // the forward's (3)
  XentNorm norm;
  int64_t start = 0;
  KILN_HD void operator()(int64_t k) const {
    const QuotRem iv = divide(k * W, V);
    const int64_t i = iv.q;
    const int32_t y = labels[i];
    float d[W] = {};
    if (y >= 0) {
      const float f = xent_factor(y, weights, i, scale, totals, norm);
      load_packs<W>(logits + k * W, d);
      for (int j = 0; j < W; ++j) {
        float e = f * (expf(d[j] - lse[i]) - smoothing / float(V));
        if (start + iv.r + j == y) e -= f * (1.0f - smoothing);
        d[j] = e;
      }
    }
    store_packs<W>(dlogits + k * W, d);
  }
};

// Item i = row i of a vocab shard (N, Vs) starting at column `start` of the whole vocabulary, from
// its lanes (XentMaxLaneBody): partials row i = (max, whole-vocabulary id of the first argmax, the
// label's logit or 0).
struct VocabPartialsBody {
  FloatPtr logits;
  const int32_t* labels;
  const float* lane_max;
  const int64_t* lane_at;
  float* partials;
  int64_t V, start;
  KILN_HD void operator()(int64_t i) const {
    const int64_t local = int64_t(labels[i]) - start;
    const RowMax m = lanes_max(lane_max, lane_at, i);
    partials[3 * i] = m.value;
    partials[3 * i + 1] = float(start + m.at);
    partials[3 * i + 2] = local >= 0 && local < V ? logits[i * V + local] : 0.0f;
  }
};

// Item = lane of row i: Σ exp(z - max_i) over its columns, each difference rounded to f32, the sum
// in double (LaneSumBody adds the lanes).
struct VocabSumexpLaneBody {
  FloatPtr logits;
  const float* max;
  double* lane_sum;
  int64_t V;
  KILN_HD void operator()(int64_t item) const {
    const int64_t i = item / kRowLanes, o = i * V;
    double sum = 0.0;
    for (int64_t v = item % kRowLanes; v < V; v += kRowLanes) sum += exp(double(logits[o + v] - max[i]));
    lane_sum[item] = sum;
  }
};

// VocabSumexpLaneBody for W lanes per item.
template <typename T>
struct VocabSumexpLaneSpanBody {
  static constexpr int W = kSpanWidth<T>, kGroups = int(kRowLanes) / W;
  const T* logits;
  const float* max;
  double* lane_sum;
  int64_t V;
  KILN_HD void operator()(int64_t item) const {
    const int64_t i = item / kGroups;
    sumexp_lanes<W>(logits, i * V, V, item % kGroups, max[i], lane_sum + item * W);
  }
};

// Item i = row i: combined (3, N) from the ranks' partials gathered (R, N, 3): the global max, the
// first argmax (lowest rank among equal maxima), the label's logit added in rank order.
struct VocabCombineBody {
  const float* gathered;
  float* combined;
  int64_t ranks, N;
  KILN_HD void operator()(int64_t i) const {
    float max = gathered[3 * i], argmax = gathered[3 * i + 1], target = 0.0f;
    for (int64_t r = 0; r < ranks; ++r) {
      const float* row = gathered + (r * N + i) * 3;
      if (row[0] > max) max = row[0], argmax = row[1];
      target += row[2];
    }
    combined[i] = max;
    combined[N + i] = argmax;
    combined[2 * N + i] = target;
  }
};

// Item i = row i: lse_i from the global max and sumexp, and the row's loss term and hit for
// the totals (XentChunkTotalsBody; nothing for an ignored row).
struct VocabRowTotalsBody {
  const float* combined;
  const double* sumexp;
  const int32_t* labels;
  const float* weights;
  float* lse;
  double* row_loss;
  int64_t* row_hit;
  int64_t N;
  KILN_HD void operator()(int64_t i) const {
    lse[i] = float(double(combined[i]) + log(sumexp[i]));
    row_loss[i] = 0.0;
    row_hit[i] = 0;
    if (labels[i] < 0) return;
    const double w = weights ? double(weights[i]) : 1.0;
    row_loss[i] = w * (double(lse[i]) - double(combined[2 * N + i]));
    row_hit[i] = w > 0 && int64_t(combined[N + i]) == labels[i];
  }
};

}  // namespace kiln::ops::cuda
