// backend/cuda/rows_bodies.h — per-row and per-column bodies of the CUDA backend's own kernels
// (elementwise_bodies.h says how they run): softmax forward and backward, BERT's masked attention softmax, bias
// gradients, embedding gathers and the deterministic scatter-add. Column sums walk the rows in
// order in double, and the scatter-add adds each destination row's sources in the order of i, as
// the CPU backend does, so they match it bit for bit whatever the grid.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/ordered_sum.h"
#include "kiln/backend/cuda/vec_access.h"

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

// ---- The softmax passes as span bodies, where scores (x), y (dy, dx) share a dtype T, cols is a
// multiple of the span width W (vec_access.h) and the operands are 16-byte aligned: a lane-group
// item does the work of W neighbouring lanes (the same partials, bit for bit), an element item
// takes a span of one row, its row from one division. HBM bytes per element in bf16 (f32:
// twice; a lane's second read of its elements comes from cache): forward 2 B (lanes) + 4 B
// (apply) = 6 B, plus 4 B of mask per element where there is one (a mask row is shared by a
// batch's heads x Sq rows, so it is read from L2); backward 4 B + 6 B = 10 B. BERT-large S512
// batch 16's attention probabilities (16, 16, 512, 512) bf16, 67M elements: forward 403 MB, 120 /
// 84 us at 100% of an H100's / H200's HBM, 172 / 120 us at the 70% target. ----

// The mask's keep flags of a span (W neighbouring keys) of a row of scores, as packs.
template <int W>
KILN_HD void load_keep(const int32_t* p, int32_t (&keep)[W]) {
  static_assert(W % 4 == 0, "a span of keys is whole packs");
  for (int q = 0; q < W / 4; ++q) {
    const Pack pack = read_pack(p + 4 * q);
    std::memcpy(keep + 4 * q, &pack, kPackBytes);
  }
}

// A row's scores: x, minus 10000 where the row's mask row marks 0 (SoftmaxScores).
template <typename T>
struct SoftmaxSpanScores {
  static constexpr int W = kSpanWidth<T>;
  const T* x;
  const int32_t* mask;  // nullptr: a plain softmax
  int64_t per_batch, cols;
  // Row r's scores and its mask row (null without a mask), found once per row.
  struct Row {
    const T* x;
    const int32_t* keep;
  };
  KILN_HD Row row(int64_t r) const {
    return {x + r * cols, mask ? mask + divide(r, per_batch).q * cols : nullptr};
  }
  // The span of a row at column c (a multiple of W).
  KILN_HD static void load(const Row& row, int64_t c, float (&v)[W]) {
    load_packs<W>(row.x + c, v);
    if (!row.keep) return;
    int32_t keep[W];
    load_keep<W>(row.keep + c, keep);
    for (int j = 0; j < W; ++j) v[j] = keep[j] ? v[j] : v[j] - 10000.0f;
  }
};

// SoftmaxLaneBody for W lanes per item (item = r (kRowLanes / W) + g: lanes gW .. gW + W - 1).
template <typename T>
struct SoftmaxLaneSpanBody {
  static constexpr int W = kSpanWidth<T>, kGroups = int(kRowLanes) / W;
  SoftmaxSpanScores<T> scores;
  float* partial;  // 2 per lane
  KILN_HD void operator()(int64_t item) const {
    const auto row = scores.row(item / kGroups);
    const int64_t c0 = (item % kGroups) * W;
    float mx[W], sum[W], v[W];
    for (int j = 0; j < W; ++j) mx[j] = -INFINITY, sum[j] = 0.0f;
    for (int64_t c = c0; c < scores.cols; c += kRowLanes) {
      scores.load(row, c, v);
      for (int j = 0; j < W; ++j) mx[j] = fmaxf(mx[j], v[j]);
    }
    for (int64_t c = c0; c < scores.cols; c += kRowLanes) {
      scores.load(row, c, v);
      for (int j = 0; j < W; ++j) sum[j] += expf(v[j] - mx[j]);
    }
    for (int j = 0; j < W; ++j) {
      partial[2 * (item * W + j)] = mx[j];
      partial[2 * (item * W + j) + 1] = sum[j];
    }
  }
};

// SoftmaxApplyBody over spans: item k = elements [k W, k W + W), in one row. y may alias x.
template <typename T>
struct SoftmaxApplySpanBody {
  static constexpr int W = kSpanWidth<T>;
  SoftmaxSpanScores<T> scores;
  T* y;
  const float* stats;
  KILN_HD void operator()(int64_t k) const {
    const QuotRem rc = divide(k * W, scores.cols);
    float v[W];
    scores.load(scores.row(rc.q), rc.r, v);
    for (int j = 0; j < W; ++j) v[j] = expf(v[j] - stats[2 * rc.q]) * stats[2 * rc.q + 1];
    store_packs<W>(y + k * W, v);
  }
};

// SoftmaxBackwardLaneBody for W lanes per item.
template <typename T>
struct SoftmaxBackwardLaneSpanBody {
  static constexpr int W = kSpanWidth<T>, kGroups = int(kRowLanes) / W;
  const T* y;
  const T* dy;
  int64_t cols;
  double* partial;  // 1 per lane
  KILN_HD void operator()(int64_t item) const {
    const int64_t o = (item / kGroups) * cols;
    double dot[W] = {};
    for (int64_t c = (item % kGroups) * W; c < cols; c += kRowLanes) {
      float u[W], v[W];
      load_packs<W>(y + o + c, u);
      load_packs<W>(dy + o + c, v);
      for (int j = 0; j < W; ++j) dot[j] += double(u[j]) * double(v[j]);
    }
    for (int j = 0; j < W; ++j) partial[item * W + j] = dot[j];
  }
};

// SoftmaxBackwardApplyBody over spans. dx may alias dy.
template <typename T>
struct SoftmaxBackwardApplySpanBody {
  static constexpr int W = kSpanWidth<T>;
  const T* y;
  const T* dy;
  T* dx;
  const double* dot;
  int64_t cols;
  float scale;
  KILN_HD void operator()(int64_t k) const {
    const double row_dot = dot[divide(k * W, cols).q];
    float u[W], v[W];
    load_packs<W>(y + k * W, u);
    load_packs<W>(dy + k * W, v);
    for (int j = 0; j < W; ++j) v[j] = scale * u[j] * float(double(v[j]) - row_dot);
    store_packs<W>(dx + k * W, v);
  }
};

// bias_grad (backend.h's order: double sums over chunks of kBiasGradRows rows, the chunks added
// in order), two launches. BERT-large S512 batch 16: dy (8192, 1024) bf16 for a linear layer,
// (8192, 4096) for the intermediate one, (1216, 30522) for the decoder; ResNet-50 batch 256: the
// fc's (256, 1000).
// - Chunk pass, item (chunk k, column c), ordered k C + c so that a warp reads 32 neighbouring
//   columns of a row: Σ dy over the chunk's rows of c. (8192, 1024): 128 x 1024 = 131072 items
//   (half of an H200's 270336 resident threads; (8192, 4096) fills it 2x), reads 16 MiB of dy,
//   writes 1 MiB of partials: ~5 us at 3.35 TB/s (H200 4.8 TB/s: ~4 us).
// - Combine, item c: the column's chunk sums in chunk order (ordered_sum: 16 loads in flight),
//   reads 1 MiB. The chain is the contract's, so C items; 128 partials are 8 batches of loads,
//   ~3-5 us (before, one load at a time: 128 waits on memory per column).
// The result is the CPU backend's bit for bit whatever the grid.

// Item k C + c: partial[k C + c] = Σ dy over rows [k R, (k + 1) R) of column c (R = kBiasGradRows),
// in double in row order.
struct BiasGradChunkBody {
  FloatPtr dy;
  double* partial;  // (chunks, C)
  int64_t N, C;
  KILN_HD void operator()(int64_t item) const {
    const int64_t k = item / C, c = item % C, r0 = k * kBiasGradRows;
    const int64_t r1 = r0 + kBiasGradRows < N ? r0 + kBiasGradRows : N;
    partial[item] = ordered_sum(0.0, r1 - r0, [&](int64_t t) { return double(dy[(r0 + t) * C + c]); });
  }
};

// BiasGradChunkBody for W neighbouring columns per item (item = k (C / W) + q: columns qW ..
// qW + W - 1 of chunk k), each summed over the chunk's rows in row order as there (the same
// partials), kRowsInFlight rows' spans loaded before they are added. Reads dy once, 2 B per
// element in bf16: (8192, 4096) at the 70% target in 29 / 20 us on an H100 / H200.
template <typename T>
struct BiasGradChunkSpanBody {
  static constexpr int W = kSpanWidth<T>, kRowsInFlight = 8;
  const T* dy;
  double* partial;  // (chunks, C)
  int64_t N, C;
  KILN_HD void operator()(int64_t item) const {
    const QuotRem kq = divide(item, C / W);
    const int64_t c0 = kq.r * W, r0 = kq.q * kBiasGradRows;
    const int64_t r1 = r0 + kBiasGradRows < N ? r0 + kBiasGradRows : N;
    double acc[W] = {};
    for (int64_t t0 = r0; t0 < r1; t0 += kRowsInFlight) {
      float v[kRowsInFlight][W] = {};
      for (int t = 0; t < kRowsInFlight; ++t)
        if (t0 + t < r1) load_packs<W>(dy + (t0 + t) * C + c0, v[t]);
      for (int t = 0; t < kRowsInFlight; ++t)
        if (t0 + t < r1)
          for (int j = 0; j < W; ++j) acc[j] += double(v[t][j]);
    }
    for (int j = 0; j < W; ++j) partial[kq.q * C + c0 + j] = acc[j];
  }
};

// Item c: db[c] += the column's chunk sums, added in chunk order.
struct BiasGradCombineBody {
  const double* partial;  // (chunks, C)
  float* db;              // (C)
  int64_t chunks, C;
  KILN_HD void operator()(int64_t c) const {
    db[c] += float(ordered_sum(0.0, chunks, [&](int64_t k) { return partial[k * C + c]; }));
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

// scatter_add_rows, three launches over a stable sort of the ids by destination row (built on the
// device per call, so the op's arguments are unchanged). BERT-large S512 batch 16: n = 8192 ids, dy
// (8192, 1024) bf16, dtable the word (30522, 1024), position (512, 1024) or token-type (2, 1024)
// gradients in f32.
// - Rank parts, item (slice s, position i) = s n + i: how many of the ids in slice s (kRankSlice
//   of them) sort before id i (a smaller row, or the same row at a smaller position). A warp
//   reads each id of its slice once, for 32 positions. 8192 x 16 items, 67M comparisons: a few us.
// - Place, item i: the rank of i (its parts added: integers, any order) and order[rank] = i,
//   sorted_rows[rank] = its row (num for an id outside the table: those sort last, skipped).
// - Runs, item (p, c) = p dim + c: where p starts a run of equal rows in sorted order, the row's
//   column c += dy[order[q]] for q over the run, in order of q (= order of i), each sum rounded to
//   dtable's dtype as the CPU's; other items return. A warp reads 32 neighbouring columns of a
//   dy row. Reads dy once (16 MiB) and each touched dtable row once (read and written, 32 MiB
//   for 8192 distinct rows): ~17 us at an H200's 4.8 TB/s. A run is one thread's chain, as the
//   CPU's order makes it: the token-type table's (two rows, ~4096 ids each) is 256 batches of
//   three dependent loads (sorted rows, order, dy), ~0.4 ms; the word table's longest ([MASK],
//   ~1000 ids) ~0.1 ms.
// Before, each (column, row class) item (at most 65536) scanned all n ids for its rows:
// 537M id reads for the word table, and two rows' chains of dependent global read-modify-writes
// for the token types.
inline constexpr int64_t kRankSlice = 512;

// id i's destination row (ids[i] - first), or num where that lies outside the table.
KILN_HD inline int64_t scatter_row(const int32_t* ids, int64_t i, int64_t num, int64_t first) {
  const int64_t row = ids[i] - first;
  return row >= 0 && row < num ? row : num;
}

// Item s n + i: rank_parts[s n + i] = the ids j of slice s that sort before id i.
struct ScatterRankBody {
  const int32_t* ids;  // (n)
  int64_t n, num, first;
  int32_t* rank_parts;  // (slices, n)
  KILN_HD void operator()(int64_t item) const {
    const int64_t s = item / n, i = item % n, row = scatter_row(ids, i, num, first);
    const int64_t j0 = s * kRankSlice, j1 = j0 + kRankSlice < n ? j0 + kRankSlice : n;
    int32_t before = 0;
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t r = scatter_row(ids, j, num, first);
      before += r < row || (r == row && j < i);
    }
    rank_parts[item] = before;
  }
};

// Item i: its rank from the slices' parts; order[rank] = i, sorted_rows[rank] = its row.
struct ScatterPlaceBody {
  const int32_t* ids;  // (n)
  const int32_t* rank_parts;  // (slices, n)
  int64_t n, num, first, slices;
  int32_t* order;        // (n)
  int32_t* sorted_rows;  // (n)
  KILN_HD void operator()(int64_t i) const {
    int64_t rank = 0;
    for (int64_t s = 0; s < slices; ++s) rank += rank_parts[s * n + i];
    order[rank] = int32_t(i);
    sorted_rows[rank] = int32_t(scatter_row(ids, i, num, first));
  }
};

// Item p dim + c: where sorted position p starts a run of one row, adds dy's rows of the run into
// that row's column c (dtable (num, dim), dy (n, dim)), in sorted order.
struct ScatterRunBody {
  FloatPtr dy, dtable;
  const int32_t* order;        // (n)
  const int32_t* sorted_rows;  // (n)
  int64_t n, num, dim;
  KILN_HD void operator()(int64_t item) const {
    const int64_t p = item / dim, c = item % dim, row = sorted_rows[p];
    if (row == num || (p > 0 && sorted_rows[p - 1] == row)) return;
    float acc = dtable[row * dim + c];
    // kOrderedLoads sorted positions at a time (ordered_sum.h): constant trip counts keep at and
    // v in registers; the run goes on while a whole batch is the row's.
    for (int64_t q0 = p, run = kOrderedLoads; run == kOrderedLoads; q0 += run) {
      int64_t at[kOrderedLoads];
      for (int64_t j = 0; j < kOrderedLoads; ++j) at[j] = q0 + j < n ? sorted_rows[q0 + j] : -1;
      run = 0;
      bool same = true;
      for (int64_t j = 0; j < kOrderedLoads; ++j) {
        same = same && at[j] == row;
        run += same ? 1 : 0;
      }
      for (int64_t j = 0; j < kOrderedLoads; ++j) at[j] = j < run ? order[q0 + j] : 0;
      float v[kOrderedLoads];
      for (int64_t j = 0; j < kOrderedLoads; ++j) v[j] = j < run ? dy[at[j] * dim + c] : 0.0f;
      for (int64_t j = 0; j < kOrderedLoads; ++j)
        if (j < run) acc = dtable.rounded(acc + v[j]);
    }
    dtable.set(row * dim + c, acc);
  }
};

}  // namespace kiln::ops::cuda
