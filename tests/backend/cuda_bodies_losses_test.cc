// The CUDA backend's cross-entropy bodies (losses_bodies.h) run on the CPU over the launch's
// grid: the row and total passes and the gradient against float64 references, the vocab shard
// parts and their combination against the CPU backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/losses_bodies.h"
#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/backend/cuda/grid.h"
#include "cuda_bodies.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::max_rel_error;
using testing::random_normal;

constexpr int64_t N = 9, V = 301;
const std::vector<int32_t> kLabels = {3, -1, 300, 0, 17, -1, 150, 299, 42};
const std::vector<float> kWeights = {1, 1, 0.5f, 1, 0, 1, 2, 1, 1};

// xent_totals (xent_checks.h) on the host, over `run_on`.
template <typename Runner>
std::vector<double> xent_totals(const std::vector<int32_t>& labels, const float* weights,
                                const std::vector<double>& loss, const std::vector<int64_t>& hit, Runner run_on) {
  const int64_t n = int64_t(labels.size()), chunks = (n + kXentTotalRows - 1) / kXentTotalRows;
  std::vector<double> partial(static_cast<size_t>(3 * chunks)), totals(3);
  run_on(chunks, XentChunkTotalsBody{labels.data(), weights, loss.data(), hit.data(), n, partial.data()});
  run_on(1, XentTotalsBody{partial.data(), chunks, totals.data()});
  return totals;
}
std::vector<double> xent_totals(const std::vector<int32_t>& labels, const float* weights,
                                const std::vector<double>& loss, const std::vector<int64_t>& hit) {
  return xent_totals(labels, weights, loss, hit, [](int64_t n, const auto& b) { run_all(n, b); });
}

struct XentResult {
  std::vector<float> lse;
  double totals[3];
};

template <typename T>
XentResult run_forward(const std::vector<T>& z, const std::vector<int32_t>& labels, float ls) {
  XentResult r{std::vector<float>(static_cast<size_t>(N)), {}};
  std::vector<double> loss(static_cast<size_t>(N));
  std::vector<int64_t> hit(static_cast<size_t>(N));
  const int64_t lanes = N * kRowLanes;  // as losses.cc launches them
  std::vector<float> lane_max(static_cast<size_t>(lanes));
  std::vector<int64_t> lane_at(static_cast<size_t>(lanes));
  std::vector<double> lane_zsum(static_cast<size_t>(lanes)), lane_sum(static_cast<size_t>(lanes));
  run_all(lanes, XentMaxLaneBody{ptr(z), V, lane_max.data(), lane_at.data(), lane_zsum.data()});
  run_all(lanes, XentSumexpLaneBody{ptr(z), V, lane_max.data(), lane_at.data(), lane_sum.data()});
  run_all(N, XentRowBody{ptr(z), labels.data(), kWeights.data(), lane_max.data(), lane_at.data(), lane_zsum.data(),
                         lane_sum.data(), r.lse.data(), loss.data(), hit.data(), V, ls});
  const std::vector<double> totals = xent_totals(labels, kWeights.data(), loss, hit);
  std::copy(totals.begin(), totals.end(), r.totals);
  return r;
}

TEST(CudaBodies, SoftmaxXentForwardTotalsAndGradientMatchFloat64) {
  for (float ls : {0.0f, 0.1f})
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> z = stored<T>(random_normal(N * V, 22, 3.0f));
      const XentResult r = run_forward(z, kLabels, ls);
      const std::vector<double> zd = values(z);
      double loss = 0, weight = 0, hits = 0;
      std::vector<double> lse(static_cast<size_t>(N)), grad(size_t(N * V), 0.0);
      const double scale = 0.5, add = 6.5;  // the divisor: Σ w + 6.5, from the totals
      for (int64_t i = 0; i < N; ++i) {
        const auto row = zd.begin() + i * V;
        const double mx = *std::max_element(row, row + V);
        double sum = 0, zsum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx), zsum += row[v];
        lse[size_t(i)] = mx + std::log(sum);
        const int32_t y = kLabels[size_t(i)];
        if (y < 0) continue;
        const double w = kWeights[size_t(i)];
        loss += w * (lse[size_t(i)] - (1 - ls) * row[y] - ls * zsum / V);
        weight += w;
        hits += w > 0 && std::max_element(row, row + V) - row == y;
      }
      for (int64_t i = 0; i < N; ++i) {
        const int32_t y = kLabels[size_t(i)];
        if (y < 0) continue;
        const auto row = zd.begin() + i * V;
        const double k = scale * kWeights[size_t(i)] / (weight + add);
        for (int64_t v = 0; v < V; ++v)
          grad[size_t(i * V + v)] = k * (std::exp(row[v] - lse[size_t(i)]) - ls / V - (1 - ls) * (v == y));
      }
      EXPECT_LE(max_rel_error(r.lse, lse), 1e-6);
      EXPECT_NEAR(r.totals[0], loss, 1e-5 * std::abs(loss));
      EXPECT_EQ(r.totals[1], weight);
      EXPECT_EQ(r.totals[2], hits);
      std::vector<T> d(z.size());
      run_all(N * V, XentGradBody{ptr(z), ptr(d), r.lse.data(), kLabels.data(), kWeights.data(),
                                  V, ls, float(scale), r.totals, {add, 0.0}});
      EXPECT_LE(max_rel_error(values(d), grad), tolerance<T>() + 1e-5) << ls;
    });
}

// Equal maxima in several lanes: the hit counts the first column, as the CPU backend's scan does;
// and rows narrower than the lanes leave lanes without columns.
TEST(CudaBodies, SoftmaxXentLanesKeepTheFirstArgmax) {
  std::vector<float> z(size_t(N * V), 0.0f);
  for (int64_t i = 0; i < N; ++i) {
    const int32_t y = kLabels[size_t(i)] < 0 ? 40 : kLabels[size_t(i)];
    z[size_t(i * V + y)] = 5.0f;                 // the label's column
    z[size_t(i * V + (y + 31) % V)] = 5.0f;  // the same value in the lane before, a later column
  }
  const XentResult r = run_forward(z, kLabels, 0.0f);
  double hits = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int32_t y = kLabels[size_t(i)];
    if (y >= 0 && kWeights[size_t(i)] > 0 && (y + 31) % V > y) ++hits;  // the label is the first maximum
  }
  EXPECT_EQ(r.totals[2], hits);
  Tensor totals = Tensor::empty({3}, DType::i64), lse = Tensor::empty({N});
  ops::softmax_xent_forward(cpu_context(), Tensor::view(z.data(), {N, V}),
                            Tensor::view(const_cast<int32_t*>(kLabels.data()), {N}, DType::i32),
                            Tensor::view(const_cast<float*>(kWeights.data()), {N}), 0.0f, lse, totals);
  EXPECT_EQ(r.totals[2], reinterpret_cast<const double*>(totals.data)[2]);
}

TEST(CudaBodies, SoftmaxXentLabelPastTheRowMakesTheLossNaNWithoutReadingPastIt) {
  std::vector<int32_t> labels = kLabels;
  labels[2] = int32_t(V);
  const std::vector<float> z = random_normal(N * V, 23);
  const XentResult r = run_forward(z, labels, 0.0f);
  EXPECT_TRUE(std::isnan(r.totals[0]));
  std::vector<float> d(z.size());
  run_all(N * V, XentGradBody{ptr(z), ptr(d), r.lse.data(), labels.data(), nullptr, V, 0.0f,
                              1.0f, r.totals, {0.0, 1.0}});
  for (float v : d) ASSERT_TRUE(std::isfinite(v));
}

TEST(CudaBodies, VocabShardPartsMatchTheCpuBackend) {
  const int64_t start = 150;
  const std::vector<float> z = random_normal(N * V, 24, 2.0f);
  const Tensor zt = Tensor::view(const_cast<float*>(z.data()), {N, V});
  const Tensor labels = Tensor::view(const_cast<int32_t*>(kLabels.data()), {N}, DType::i32);
  const Tensor weights = Tensor::view(const_cast<float*>(kWeights.data()), {N});
  std::vector<float> partials(static_cast<size_t>(3 * N)), lane_max(static_cast<size_t>(N * kRowLanes));
  std::vector<int64_t> lane_at(lane_max.size());
  std::vector<double> lane_zsum(lane_max.size()), lane_sum(lane_max.size());
  run_all(N * kRowLanes, XentMaxLaneBody{ptr(z), V, lane_max.data(), lane_at.data(), lane_zsum.data()});
  run_all(N, VocabPartialsBody{ptr(z), kLabels.data(), lane_max.data(), lane_at.data(), partials.data(), V, start});
  Tensor want = Tensor::empty({N, 3});
  ops::vocab_xent_partials(cpu_context(), zt, labels, start, want);
  EXPECT_EQ(std::memcmp(partials.data(), want.data, want.nbytes()), 0);

  std::vector<float> mx(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) mx[size_t(i)] = partials[size_t(3 * i)] + 0.25f;
  std::vector<double> sums(static_cast<size_t>(N));
  run_all(N * kRowLanes, VocabSumexpLaneBody{ptr(z), mx.data(), lane_sum.data(), V});
  run_all(N, LaneSumBody{lane_sum.data(), sums.data()});
  Tensor want_sums = Tensor::empty({N}, DType::f64);
  ops::vocab_xent_sumexp(cpu_context(), zt, Tensor::view(mx.data(), {N}), want_sums);
  // The CPU backend sums a float exp (a few ulp, as its unsharded loss does), the body a double one.
  EXPECT_LE(max_rel_error(sums, std::vector<double>(want_sums.ptr<double>(),
                                                    want_sums.ptr<double>() + N)),
            1e-6);

  std::vector<float> lse(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) lse[size_t(i)] = mx[size_t(i)] + std::log(float(sums[size_t(i)]));
  std::vector<float> d(z.size());
  double totals[3] = {0.0, 2.5, 0.0};  // the divisor: 2.5 + 0.5
  run_all(N * V, XentGradBody{ptr(z), ptr(d), lse.data(), kLabels.data(), kWeights.data(), V, 0.0f, 0.5f, totals,
                              {0.5, 0.0}, start});
  Tensor want_d = Tensor::empty({N, V});
  ops::vocab_xent_backward(cpu_context(), zt, Tensor::view(lse.data(), {N}), labels, weights,
                           start, 0.5f, Tensor::view(totals, {3}, DType::i64), {0.5, 0.0}, want_d);
  EXPECT_LE(max_rel_error(d, std::vector<float>(want_d.ptr<float>(), want_d.ptr<float>() + N * V)),
            1e-6);
}

// Three ranks' partials (ties between ranks included) combined, then the totals: bit for bit the
// CPU backend's ops.
TEST(CudaBodies, VocabCombineAndTotalsAreTheCpuBackendsBitForBit) {
  const int64_t R = 3;
  std::vector<float> gathered = random_normal(R * N * 3, 25, 2.0f);
  for (int64_t i = 0; i < N; ++i) gathered[size_t(((2 * N) + i) * 3)] = gathered[size_t(i * 3)];  // rank 2 ties rank 0
  std::vector<float> combined(static_cast<size_t>(3 * N));
  run_all(N, VocabCombineBody{gathered.data(), combined.data(), R, N});
  Tensor want = Tensor::empty({3, N});
  ops::vocab_xent_combine(cpu_context(), Tensor::view(gathered.data(), {R, N, 3}), want);
  EXPECT_EQ(std::memcmp(combined.data(), want.data, want.nbytes()), 0);

  for (float& m : combined) m = std::abs(m);
  std::vector<double> sumexp(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) sumexp[size_t(i)] = 1.5 + double(i);
  std::vector<int32_t> labels = kLabels;
  labels[0] = int32_t(combined[size_t(N)]);  // row 0 is a hit
  std::vector<float> lse(static_cast<size_t>(N));
  std::vector<double> row_loss(static_cast<size_t>(N)), totals(3);
  std::vector<int64_t> row_hit(static_cast<size_t>(N));
  run_all(N, VocabRowTotalsBody{combined.data(), sumexp.data(), labels.data(), kWeights.data(), lse.data(),
                                row_loss.data(), row_hit.data(), N});
  totals = xent_totals(labels, kWeights.data(), row_loss, row_hit);
  Tensor want_lse = Tensor::empty({N}), want_totals = Tensor::empty({3}, DType::i64);
  ops::vocab_xent_totals(cpu_context(), Tensor::view(combined.data(), {3, N}), Tensor::view(sumexp.data(), {N}, DType::f64),
                         Tensor::view(labels.data(), {N}, DType::i32), Tensor::view(const_cast<float*>(kWeights.data()), {N}),
                         want_lse, want_totals);
  EXPECT_EQ(std::memcmp(lse.data(), want_lse.data, want_lse.nbytes()), 0);
  EXPECT_EQ(std::memcmp(totals.data(), want_totals.data, want_totals.nbytes()), 0);
  EXPECT_GE(totals[2], 1.0);
}

TEST(CudaBodies, XentTotalsOverManyChunksMatchFloat64OnAnyGrid) {
  // 1000 rows: 16 chunks, the last of 40 rows; a third of the labels ignored.
  const int64_t n = 1000;
  std::vector<int32_t> labels(static_cast<size_t>(n));
  std::vector<double> loss(static_cast<size_t>(n));
  std::vector<int64_t> hit(static_cast<size_t>(n));
  const std::vector<float> w = random_normal(n, 51), l = random_normal(n, 52, 3.0f);
  double want_loss = 0.0, want_weight = 0.0;
  int64_t want_hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    labels[size_t(i)] = i % 3 == 1 ? -1 : int32_t(i % 7);
    loss[size_t(i)] = labels[size_t(i)] < 0 ? 0.0 : double(l[size_t(i)]);
    hit[size_t(i)] = labels[size_t(i)] >= 0 && i % 5 == 0;
    if (labels[size_t(i)] < 0) continue;
    want_loss += loss[size_t(i)], want_weight += double(w[size_t(i)]), want_hits += hit[size_t(i)];
  }
  const std::vector<double> got = xent_totals(labels, w.data(), loss, hit);
  EXPECT_NEAR(got[0], want_loss, 1e-12 * std::abs(want_loss) + 1e-12);
  EXPECT_NEAR(got[1], want_weight, 1e-12 * std::abs(want_weight) + 1e-12);
  EXPECT_EQ(got[2], double(want_hits));
  EXPECT_EQ(xent_totals(labels, w.data(), loss, hit, [](int64_t m, const auto& b) { run_narrow(m, b); }), got);
  EXPECT_EQ(xent_totals(labels, nullptr, loss, hit)[1], double(n - n / 3));
}

}  // namespace
}  // namespace kiln
