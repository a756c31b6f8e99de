// The row kernels' span bodies (LayerNorm's, backend/cuda/layernorm_bodies.h, softmax's,
// rows_bodies.h, and the cross-entropies', losses_bodies.h: W lanes per lane-group item, a span
// per element item) run on the CPU over their
// launch's grid, bitwise against the lane and element bodies they replace (the same partial
// sums, the same outputs) and against float64 references, in every storage type, for rows
// shorter and longer than the 32 lanes and not a multiple of them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kiln/backend/cuda/layernorm_bodies.h"
#include "kiln/backend/cuda/losses_bodies.h"
#include "kiln/backend/cuda/rows_bodies.h"
#include "cuda_bodies.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::max_rel_error;
using testing::random_normal;

const int64_t kRows = 37;  // parameter-gradient chunks of 32 and 5 rows
const int64_t kWidths[] = {8, 24, 40, 264, 1024};  // multiples of 8 (a bf16 span)

// The forward's statistics and output, by one path's bodies.
template <typename T>
struct Forward {
  std::vector<double> partial;
  std::vector<float> mean, rstd;
  std::vector<T> y, sum;
};

template <typename T>
Forward<T> forward_by_lanes(const std::vector<T>& x, const std::vector<T>* residual, const std::vector<T>& w,
                            const std::vector<T>& b, int64_t C) {
  const int64_t N = int64_t(x.size()) / C;
  Forward<T> f{std::vector<double>(size_t(2 * N * kRowLanes)), std::vector<float>(size_t(N)),
               std::vector<float>(size_t(N)), std::vector<T>(x.size()), std::vector<T>(x.size())};
  RowMomentsLaneBody moments{ptr(x), C, f.partial.data()};
  if (residual) moments.residual = ptr(*residual), moments.sum = ptr(f.sum);
  run_all(N * kRowLanes, moments);
  run_all(N, LayerNormStatsBody{f.partial.data(), C, 1e-5f, f.mean.data(), f.rstd.data()});
  run_all(N * C, LayerNormApplyBody{residual ? ptr(f.sum) : ptr(x), ptr(w), ptr(b), ptr(f.y), f.mean.data(),
                                    f.rstd.data(), C});
  return f;
}

template <typename T>
Forward<T> forward_by_spans(const std::vector<T>& x, const std::vector<T>* residual, const std::vector<T>& w,
                            const std::vector<T>& b, int64_t C) {
  const int64_t N = int64_t(x.size()) / C;
  Forward<T> f{std::vector<double>(size_t(2 * N * kRowLanes)), std::vector<float>(size_t(N)),
               std::vector<float>(size_t(N)), std::vector<T>(x.size()), std::vector<T>(x.size())};
  RowMomentsSpanBody<T> moments{x.data(), C, f.partial.data()};
  if (residual) moments.residual = residual->data(), moments.sum = f.sum.data();
  run_all(N * moments.kGroups, moments);
  run_all(N, LayerNormStatsBody{f.partial.data(), C, 1e-5f, f.mean.data(), f.rstd.data()});
  run_all(N * C / moments.W, LayerNormApplySpanBody<T>{residual ? f.sum.data() : x.data(), w.data(), b.data(),
                                                       f.y.data(), f.mean.data(), f.rstd.data(), C});
  return f;
}

TEST(CudaSpans, LayerNormForwardIsTheLaneBodiesBitForBitAndMatchesFloat64) {
  for (int64_t C : kWidths)
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = stored<T>(random_normal(kRows * C, 31, 2.0f)), res = stored<T>(random_normal(kRows * C, 32));
      const std::vector<T> w = stored<T>(random_normal(C, 33)), b = stored<T>(random_normal(C, 34));
      for (const std::vector<T>* residual : {(const std::vector<T>*)nullptr, &res}) {
        const Forward<T> want = forward_by_lanes(x, residual, w, b, C), got = forward_by_spans(x, residual, w, b, C);
        EXPECT_TRUE(same_bits(got.partial, want.partial)) << "C " << C;
        EXPECT_TRUE(same_bits(got.mean, want.mean) && same_bits(got.rstd, want.rstd)) << "C " << C;
        EXPECT_TRUE(same_bits(got.y, want.y)) << "C " << C;
        EXPECT_TRUE(same_bits(got.sum, want.sum)) << "C " << C;
        const std::vector<double> in = values(residual ? got.sum : x), wd = values(w), bd = values(b);
        std::vector<double> exact(in.size());
        for (int64_t r = 0; r < kRows; ++r) {
          double m = 0, var = 0;
          for (int64_t c = 0; c < C; ++c) m += in[size_t(r * C + c)] / double(C);
          for (int64_t c = 0; c < C; ++c) var += std::pow(in[size_t(r * C + c)] - m, 2) / double(C);
          for (int64_t c = 0; c < C; ++c)
            exact[size_t(r * C + c)] = (in[size_t(r * C + c)] - m) / std::sqrt(var + 1e-5) * wd[size_t(c)] + bd[size_t(c)];
        }
        EXPECT_LE(max_rel_error(values(got.y), exact), tolerance<T>()) << "C " << C;
      }
    });
}

TEST(CudaSpans, LayerNormBackwardDxIsTheLaneBodiesBitForBit) {
  for (int64_t C : kWidths)
    for (bool accumulate : {false, true})
      for_each_type([&](auto tag) {
        using T = decltype(tag);
        const int64_t N = kRows;
        const std::vector<T> x = stored<T>(random_normal(N * C, 35, 2.0f)), dy = stored<T>(random_normal(N * C, 36));
        const std::vector<T> w = stored<T>(random_normal(C, 37)), b = stored<T>(random_normal(C, 38));
        const Forward<T> f = forward_by_lanes<T>(x, nullptr, w, b, C);
        const std::vector<T> dx0 = stored<T>(random_normal(N * C, 39));
        std::vector<double> lanes(size_t(2 * N * kRowLanes)), span_lanes(lanes.size());
        std::vector<float> means(size_t(2 * N)), span_means(means.size());
        std::vector<T> want = dx0, got = dx0;
        run_all(N * kRowLanes, LayerNormGradLaneBody{ptr(x), ptr(dy), ptr(w), f.mean.data(), f.rstd.data(), C, lanes.data()});
        run_all(N, LayerNormGradStatsBody{lanes.data(), C, means.data()});
        run_all(N * C, LayerNormGradApplyBody{ptr(x), ptr(dy), ptr(w), ptr(want), f.mean.data(), f.rstd.data(),
                                              means.data(), C, accumulate});
        const LayerNormGradSpanBody<T> span{x.data(), dy.data(), w.data(), f.mean.data(), f.rstd.data(), C,
                                            span_lanes.data()};
        run_all(N * span.kGroups, span);
        run_all(N, LayerNormGradStatsBody{span_lanes.data(), C, span_means.data()});
        run_all(N * C / span.W, LayerNormGradApplySpanBody<T>{x.data(), dy.data(), w.data(), got.data(), f.mean.data(),
                                                              f.rstd.data(), span_means.data(), C, accumulate});
        EXPECT_TRUE(same_bits(span_lanes, lanes)) << "C " << C;
        EXPECT_TRUE(same_bits(got, want)) << "C " << C << " accumulate " << accumulate;
        std::vector<T> in_place = dy;  // dx may alias dy
        run_all(N * C / span.W, LayerNormGradApplySpanBody<T>{x.data(), in_place.data(), w.data(), in_place.data(),
                                                              f.mean.data(), f.rstd.data(), span_means.data(), C, false});
        std::vector<T> fresh(dy.size());
        run_all(N * C, LayerNormGradApplyBody{ptr(x), ptr(dy), ptr(w), ptr(fresh), f.mean.data(), f.rstd.data(),
                                              means.data(), C, false});
        EXPECT_TRUE(same_bits(in_place, fresh)) << "C " << C;
      });
}

TEST(CudaSpans, LayerNormParameterChunksAreTheColumnBodiesBitForBit) {
  for (int64_t C : kWidths)
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      const int64_t N = kRows, chunks = (N + ops::kLayerNormGradRows - 1) / ops::kLayerNormGradRows;
      const std::vector<T> x = stored<T>(random_normal(N * C, 44, 2.0f)), dy = stored<T>(random_normal(N * C, 45));
      const std::vector<T> w = stored<T>(random_normal(C, 46)), b = stored<T>(random_normal(C, 47));
      const Forward<T> f = forward_by_lanes(x, static_cast<const std::vector<T>*>(nullptr), w, b, C);
      std::vector<float> want(size_t(2 * chunks * C)), got(want.size());
      run_all(chunks * C, LayerNormParamChunkBody{ptr(x), ptr(dy), f.mean.data(), f.rstd.data(), N, C, want.data()});
      using Body = LayerNormParamChunkSpanBody<T>;
      run_all(chunks * C / Body::W, Body{x.data(), dy.data(), f.mean.data(), f.rstd.data(), N, C, got.data()});
      EXPECT_TRUE(same_bits(got, want)) << "C " << C;
    });
}

// Plain rows and BERT's masked attention rows (per_batch rows share a mask row).
TEST(CudaSpans, SoftmaxIsTheLaneBodiesBitForBitAndMatchesFloat64) {
  const int64_t per_batch = 3;
  for (int64_t cols : kWidths)
    for (bool masked : {false, true})
      for_each_type([&](auto tag) {
        using T = decltype(tag);
        const int64_t rows = 4 * per_batch, n = rows * cols;
        const std::vector<T> x = stored<T>(random_normal(n, 41, 4.0f));
        std::vector<int32_t> mask_rows(size_t(4 * cols));
        for (size_t i = 0; i < mask_rows.size(); ++i) mask_rows[i] = (i * 7919) % 5 != 0;
        const int32_t* mask = masked ? mask_rows.data() : nullptr;
        std::vector<float> partial(size_t(2 * rows * kRowLanes)), stats(size_t(2 * rows));
        std::vector<float> span_partial(partial.size()), span_stats(stats.size());
        std::vector<T> want(x.size()), got(x.size());
        const SoftmaxScores scores{ptr(x), mask, per_batch, cols};
        run_all(rows * kRowLanes, SoftmaxLaneBody{scores, partial.data()});
        run_all(rows, SoftmaxRowStatsBody{partial.data(), stats.data()});
        run_all(n, SoftmaxApplyBody{scores, ptr(want), stats.data()});
        const SoftmaxSpanScores<T> span_scores{x.data(), mask, per_batch, cols};
        using Lanes = SoftmaxLaneSpanBody<T>;
        run_all(rows * Lanes::kGroups, Lanes{span_scores, span_partial.data()});
        run_all(rows, SoftmaxRowStatsBody{span_partial.data(), span_stats.data()});
        run_all(n / Lanes::W, SoftmaxApplySpanBody<T>{span_scores, got.data(), span_stats.data()});
        EXPECT_TRUE(same_bits(span_partial, partial)) << "cols " << cols << " masked " << masked;
        EXPECT_TRUE(same_bits(got, want)) << "cols " << cols << " masked " << masked;
        const std::vector<double> xd = values(x);
        std::vector<double> exact(xd.size());
        for (int64_t r = 0; r < rows; ++r) {
          auto score = [&](int64_t c) {
            const bool keep = !mask || mask[(r / per_batch) * cols + c];
            return xd[size_t(r * cols + c)] - (keep ? 0.0 : 10000.0);
          };
          double mx = -INFINITY, sum = 0;
          for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, score(c));
          for (int64_t c = 0; c < cols; ++c) sum += std::exp(score(c) - mx);
          for (int64_t c = 0; c < cols; ++c) exact[size_t(r * cols + c)] = std::exp(score(c) - mx) / sum;
        }
        EXPECT_LE(max_rel_error(values(got), exact), tolerance<T>()) << "cols " << cols;
      });
}

TEST(CudaSpans, SoftmaxBackwardIsTheLaneBodiesBitForBit) {
  for (int64_t cols : kWidths)
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      const int64_t rows = kRows, n = rows * cols;
      const std::vector<T> y = stored<T>(random_normal(n, 42)), dy = stored<T>(random_normal(n, 43));
      std::vector<double> partial(size_t(rows * kRowLanes)), dot(static_cast<size_t>(rows));
      std::vector<double> span_partial(partial.size()), span_dot(dot.size());
      std::vector<T> want(y.size()), got = dy;  // got: over dy (dx may alias dy)
      run_all(rows * kRowLanes, SoftmaxBackwardLaneBody{ptr(y), ptr(dy), cols, partial.data()});
      run_all(rows, LaneSumBody{partial.data(), dot.data()});
      run_all(n, SoftmaxBackwardApplyBody{ptr(y), ptr(dy), ptr(want), dot.data(), cols, 0.125f});
      using Lanes = SoftmaxBackwardLaneSpanBody<T>;
      run_all(rows * Lanes::kGroups, Lanes{y.data(), dy.data(), cols, span_partial.data()});
      run_all(rows, LaneSumBody{span_partial.data(), span_dot.data()});
      run_all(n / Lanes::W, SoftmaxBackwardApplySpanBody<T>{y.data(), got.data(), got.data(), span_dot.data(), cols, 0.125f});
      EXPECT_TRUE(same_bits(span_partial, partial)) << "cols " << cols;
      EXPECT_TRUE(same_bits(got, want)) << "cols " << cols;
    });
}

// Logits with repeated maxima (the first argmax is each lane's and the row's), rows ignored
// (label -1), label smoothing and per-row weights; the vocab-parallel parts of a shard at 3 V.
TEST(CudaSpans, CrossEntropyIsTheLaneBodiesBitForBit) {
  for (int64_t V : kWidths)
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      using Lanes = XentMaxLaneSpanBody<T>;
      const int64_t N = 13, lanes = N * kRowLanes, start = 3 * V;
      std::vector<float> raw = random_normal(N * V, 48, 3.0f);
      for (int64_t i = 0; i < N; ++i) raw[size_t(i * V + (7 * i) % V)] = raw[size_t(i * V + V - 1)] = 9.0f;
      const std::vector<T> z = stored<T>(raw);
      std::vector<int32_t> labels(static_cast<size_t>(N));
      std::vector<float> weights(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i) {
        labels[size_t(i)] = i % 4 == 3 ? -1 : int32_t((5 * i + 1) % V);
        weights[size_t(i)] = 0.5f + 0.1f * float(i);
      }
      std::vector<float> lane_max(static_cast<size_t>(lanes)), span_max(lane_max.size());
      std::vector<int64_t> lane_at(static_cast<size_t>(lanes)), span_at(lane_at.size());
      std::vector<double> zsum(static_cast<size_t>(lanes)), span_zsum(zsum.size()), sum(static_cast<size_t>(lanes)), span_sum(sum.size());
      run_all(lanes, XentMaxLaneBody{ptr(z), V, lane_max.data(), lane_at.data(), zsum.data()});
      run_all(lanes, XentSumexpLaneBody{ptr(z), V, lane_max.data(), lane_at.data(), sum.data()});
      run_all(N * Lanes::kGroups, Lanes{z.data(), V, span_max.data(), span_at.data(), span_zsum.data()});
      run_all(N * Lanes::kGroups,
              XentSumexpLaneSpanBody<T>{z.data(), V, span_max.data(), span_at.data(), span_sum.data()});
      EXPECT_TRUE(same_bits(span_max, lane_max) && same_bits(span_at, lane_at)) << "V " << V;
      EXPECT_TRUE(same_bits(span_zsum, zsum) && same_bits(span_sum, sum)) << "V " << V;
      std::vector<float> max(static_cast<size_t>(N)), lse(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i) {
        max[size_t(i)] = lanes_max(lane_max.data(), lane_at.data(), i).value;
        lse[size_t(i)] = max[size_t(i)] + 2.5f;
      }
      run_all(lanes, VocabSumexpLaneBody{ptr(z), max.data(), sum.data(), V});
      run_all(N * Lanes::kGroups, VocabSumexpLaneSpanBody<T>{z.data(), max.data(), span_sum.data(), V});
      EXPECT_TRUE(same_bits(span_sum, sum)) << "vocab V " << V;

      const std::vector<double> totals = {0.0, 7.5, 0.0};
      const ops::XentNorm norm{0.0, 1.0};
      std::vector<T> want(z.size()), got = z;  // got: over the logits (dlogits may alias them)
      run_all(N * V, XentGradBody{ptr(z), ptr(want), lse.data(), labels.data(), weights.data(), V, 0.1f, 0.25f,
                                  totals.data(), norm});
      run_all(N * V / Lanes::W, XentGradSpanBody<T>{got.data(), got.data(), lse.data(), labels.data(), weights.data(),
                                                    V, 0.1f, 0.25f, totals.data(), norm});
      EXPECT_TRUE(same_bits(got, want)) << "grad V " << V;
      for (int64_t first : {int64_t(0), start}) {  // the shard holding the labels, and one past them
        std::vector<T> vocab_want(z.size()), vocab_got(z.size());
        run_all(N * V, XentGradBody{ptr(z), ptr(vocab_want), lse.data(), labels.data(), nullptr, V, 0.0f, 0.25f,
                                    totals.data(), norm, first});
        run_all(N * V / Lanes::W, XentGradSpanBody<T>{z.data(), vocab_got.data(), lse.data(), labels.data(), nullptr,
                                                      V, 0.0f, 0.25f, totals.data(), norm, first});
        EXPECT_TRUE(same_bits(vocab_got, vocab_want)) << "vocab grad V " << V << " start " << first;
      }
    });
}

// 75 rows: bias-gradient chunks of 64 and 11 rows.
TEST(CudaSpans, BiasGradChunksAreTheColumnBodiesBitForBit) {
  for (int64_t C : kWidths)
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      using Body = BiasGradChunkSpanBody<T>;
      const int64_t N = 75, chunks = (N + ops::kBiasGradRows - 1) / ops::kBiasGradRows;
      const std::vector<T> dy = stored<T>(random_normal(N * C, 49));
      std::vector<double> want(static_cast<size_t>(chunks * C)), got(want.size());
      run_all(chunks * C, BiasGradChunkBody{ptr(dy), want.data(), N, C});
      run_all(chunks * C / Body::W, Body{dy.data(), got.data(), N, C});
      EXPECT_TRUE(same_bits(got, want)) << "C " << C;
    });
}

}  // namespace
}  // namespace kiln
