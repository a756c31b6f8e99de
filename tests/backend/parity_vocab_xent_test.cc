// Parity of the vocab-parallel cross-entropy ops: two shards of a row's logits, combined as
// nn::VocabParallelMlmLoss combines them (partials, combine, sumexp, totals, backward), against
// the float64 softmax cross-entropy of the whole rows.
#include <algorithm>
#include <cmath>

#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using testing::Parity;

constexpr int64_t N = 9, V = 40, kShard = 20;
const std::vector<int32_t> kLabels = {3, 25, -1, 19, 20, 39, 0, 31, 7};

struct Reference {
  std::vector<double> max, lse;
  std::vector<int64_t> argmax;
};

Reference reference(const std::vector<double>& z) {
  Reference r;
  for (int64_t i = 0; i < N; ++i) {
    const auto row = z.begin() + i * V;
    const auto best = std::max_element(row, row + V);  // the first maximum
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - *best);
    r.max.push_back(*best);
    r.argmax.push_back(best - row);
    r.lse.push_back(*best + std::log(sum));
  }
  return r;
}

TEST(ParityVocabXent, ShardsCombineToTheWholeRowsCrossEntropy) {
  Parity p;
  const Tensor labels =
      p.to_device(Tensor::view(const_cast<int32_t*>(kLabels.data()), {N}, DType::i32));
  const std::vector<float> w = {1, 1, 1, 0.5f, 1, 0, 1, 1, 2};
  const Tensor weights = p.to_device(Tensor::view(const_cast<float*>(w.data()), {N}));
  const Tensor whole = p.random({N, V}, DType::f32, 21, 3.0f);
  const std::vector<double> z = p.host(whole);
  const Reference ref = reference(z);
  std::vector<float> max(N, -1e30f), gathered;  // gathered (2, N, 3): both shards' partials
  std::vector<double> sumexp(N, 0.0);
  for (int64_t shard = 0; shard < 2; ++shard) {
    std::vector<float> part;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t v = 0; v < kShard; ++v) part.push_back(float(z[size_t(i * V + shard * kShard + v)]));
    const Tensor s = p.from_host(part, {N, kShard}, DType::f32);
    Tensor partials = p.zeros({N, 3}, DType::f32);
    ops::vocab_xent_partials(p.ctx, s, labels, shard * kShard, partials);
    const std::vector<double> got = p.host(partials);
    for (int64_t i = 0; i < N; ++i) {
      const auto row = z.begin() + i * V + shard * kShard;
      const auto best = std::max_element(row, row + kShard);
      EXPECT_EQ(got[size_t(3 * i)], *best) << "row " << i;
      EXPECT_EQ(got[size_t(3 * i + 1)], double(shard * kShard + (best - row))) << "row " << i;
      const int64_t local = kLabels[size_t(i)] - shard * kShard;
      EXPECT_EQ(got[size_t(3 * i + 2)], local >= 0 && local < kShard ? row[local] : 0.0) << "row " << i;
      max[size_t(i)] = std::max(max[size_t(i)], float(got[size_t(3 * i)]));
    }
    for (double v : got) gathered.push_back(float(v));
  }
  for (int64_t i = 0; i < N; ++i) EXPECT_EQ(double(max[size_t(i)]), ref.max[size_t(i)]);
  // Combined over the shards: the global max, the first argmax, the label's logit (0 when ignored).
  Tensor combined = p.zeros({3, N}, DType::f32);
  ops::vocab_xent_combine(p.ctx, p.from_host(gathered, {2, N, 3}, DType::f32), combined);
  const std::vector<double> c = p.host(combined);
  for (int64_t i = 0; i < N; ++i) {
    const int32_t y = kLabels[size_t(i)];
    EXPECT_EQ(c[size_t(i)], ref.max[size_t(i)]) << "row " << i;
    EXPECT_EQ(c[size_t(N + i)], double(ref.argmax[size_t(i)])) << "row " << i;
    EXPECT_EQ(c[size_t(2 * N + i)], y >= 0 ? z[size_t(i * V + y)] : 0.0) << "row " << i;
  }
  const Tensor max_t = p.to_device(Tensor::view(max.data(), {N}));
  std::vector<float> lse(N);
  for (int64_t shard = 0; shard < 2; ++shard) {
    std::vector<float> part;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t v = 0; v < kShard; ++v) part.push_back(float(z[size_t(i * V + shard * kShard + v)]));
    const Tensor s = p.from_host(part, {N, kShard}, DType::f32);
    Tensor sums_dev = Tensor::empty({N}, DType::f64, p.ctx.device);
    Tensor sums = Tensor::empty({N}, DType::f64);
    ops::vocab_xent_sumexp(p.ctx, s, max_t, sums_dev);
    ops::copy(p.ctx, sums_dev, sums);
    for (int64_t i = 0; i < N; ++i) sumexp[size_t(i)] += sums.ptr<double>()[i];
  }
  for (int64_t i = 0; i < N; ++i) {
    const double l = double(max[size_t(i)]) + std::log(sumexp[size_t(i)]);
    // z - max is rounded to f32 before exp, as in softmax_xent_forward.
    EXPECT_NEAR(l, ref.lse[size_t(i)], 1e-7 * std::abs(ref.lse[size_t(i)])) << "row " << i;
    lse[size_t(i)] = float(l);
  }
  // The totals from the combined rows and the whole rows' sums of exponentials, against float64.
  Tensor sums = Tensor::empty({N}, DType::f64, p.ctx.device), lse_dev = p.zeros({N}, DType::f32);
  ops::copy(p.ctx, Tensor::view(sumexp.data(), {N}, DType::f64), sums);
  Tensor totals_dev = Tensor::empty({3}, DType::i64, p.ctx.device);
  ops::vocab_xent_totals(p.ctx, combined, sums, labels, weights, lse_dev, totals_dev);
  double totals[3];
  Tensor totals_view = Tensor::view(totals, {3}, DType::i64);
  ops::copy(p.ctx, totals_dev, totals_view);
  EXPECT_EQ(p.host(lse_dev), std::vector<double>(lse.begin(), lse.end()));
  double want_loss = 0, want_weight = 0, want_hits = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int32_t y = kLabels[size_t(i)];
    if (y < 0) continue;
    want_loss += w[size_t(i)] * (ref.lse[size_t(i)] - z[size_t(i * V + y)]);
    want_weight += w[size_t(i)];
    want_hits += w[size_t(i)] > 0 && ref.argmax[size_t(i)] == y;
  }
  EXPECT_NEAR(totals[0], want_loss, 1e-6 * std::abs(want_loss));
  EXPECT_EQ(totals[1], want_weight);
  EXPECT_EQ(totals[2], want_hits);
  EXPECT_GT(want_hits, 0) << "the test's rows should include a hit";
  // Backward: softmax - onehot of each shard, scaled by w_i / norm, norm = Σ w + 7.5 from the
  // totals on the device.
  const Tensor lse_t = p.to_device(Tensor::view(lse.data(), {N}));
  const double norm = want_weight + 7.5;
  for (int64_t shard = 0; shard < 2; ++shard) {
    std::vector<float> part;
    std::vector<double> want;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t v = 0; v < kShard; ++v) {
        const int64_t g = shard * kShard + v;
        part.push_back(float(z[size_t(i * V + g)]));
        const double k = kLabels[size_t(i)] < 0 ? 0.0 : 0.5 * w[size_t(i)] / norm;
        want.push_back(k * (std::exp(z[size_t(i * V + g)] - ref.lse[size_t(i)]) - (g == kLabels[size_t(i)])));
      }
    const Tensor s = p.from_host(part, {N, kShard}, DType::f32);
    Tensor d = p.zeros({N, kShard}, DType::f32);
    ops::vocab_xent_backward(p.ctx, s, lse_t, labels, weights, shard * kShard, 0.5f, totals_dev, {7.5, 0.0}, d);
    p.expect_close(d, want, "vocab_xent_backward");
  }
  Tensor bad = p.zeros({N, 2}, DType::f32);
  EXPECT_THROW(ops::vocab_xent_partials(p.ctx, whole, labels, 0, bad), Error);
}

}  // namespace
}  // namespace kiln
