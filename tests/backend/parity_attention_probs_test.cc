// Parity of the attention probabilities fused with their dropout: forward against the softmax
// and the Philox mask in float64, and both directions bit for bit against the unfused ops they
// are defined by, for rows that do and do not start on a 4-element Philox block.
#include <cmath>
#include <utility>

#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using testing::Parity;

struct Case {
  int64_t B, heads, S;
  int64_t element_offset;  // the heads are a tensor-parallel slice starting at this element
};

constexpr Case kCases[] = {{3, 2, 7, 0}, {2, 3, 64, 0}, {2, 2, 5, 2 * 5 * 5}, {1, 2, 6, 3}};
constexpr float kDrop = 0.25f;

ops::DropoutMask mask_for(Parity& p, const Case& c, int64_t first_sample) {
  return {kDrop, RngStream{7, rng_stream(RngPurpose::dropout, 4, 0)}, p.sample_offset(first_sample), c.B,
          c.element_offset};
}

// Every key but the last two of each batch row is a token, and all of them in row 0.
std::vector<int32_t> key_mask_values(int64_t B, int64_t S) {
  std::vector<int32_t> m(size_t(B * S), 1);
  for (int64_t b = 1; b < B; ++b) m[size_t(b * S + S - 1)] = m[size_t(b * S + S - 2)] = 0;
  return m;
}

Tensor key_mask(Parity& p, int64_t B, int64_t S) {
  std::vector<int32_t> m = key_mask_values(B, S);
  return p.to_device(Tensor::view(m.data(), {B, S}, DType::i32));
}

// The probabilities of scores + key bias in float64, and the dropped ones of the stored `probs`
// under the documented mask for samples from `first_sample`.
std::pair<std::vector<double>, std::vector<double>> reference_forward(const Case& c, const std::vector<double>& hs,
                                                                      const std::vector<double>& probs,
                                                                      const RngStream& rng, uint64_t first_sample) {
  const std::vector<int32_t> hm = key_mask_values(c.B, c.S);
  std::vector<double> want_p(hs.size()), want_d(hs.size());
  const int64_t per = c.heads * c.S * c.S;
  for (int64_t r = 0; r < c.B * c.heads * c.S; ++r) {
    const int64_t b = r / (c.heads * c.S);
    double mx = -1e300, sum = 0;
    for (int64_t k = 0; k < c.S; ++k) mx = std::max(mx, hs[size_t(r * c.S + k)]);
    for (int64_t k = 0; k < c.S; ++k) {
      const size_t i = size_t(r * c.S + k);
      sum += want_p[i] = std::exp(hs[i] + (hm[size_t(b * c.S + k)] != 0 ? 0.0 : -10000.0) - mx);
    }
    for (int64_t k = 0; k < c.S; ++k) {
      const size_t i = size_t(r * c.S + k);
      want_p[i] /= sum;
      const int64_t element = c.element_offset + int64_t(i) - b * per;
      const bool drops = testing::dropout_drops(rng, first_sample + uint64_t(b), element, kDrop);
      want_d[i] = drops ? 0.0 : probs[i] / (1.0 - kDrop);
    }
  }
  return {want_p, want_d};
}

TEST(ParityAttentionProbs, ForwardIsTheSoftmaxThenTheDropoutMask) {
  Parity p;
  for (const Case& c : kCases)
    for (DType in : {DType::f32, DType::bf16})
      for (DType out : testing::float_dtypes()) {
        const Shape shape{c.B, c.heads, c.S, c.S};
        const Tensor scores = p.random(shape, in, 21, 2.0f), mask = key_mask(p, c.B, c.S);
        const ops::DropoutMask drop = mask_for(p, c, 40);
        Tensor probs = p.zeros(shape, out), dropped = p.zeros(shape, out);
        ops::attention_probs_forward(p.ctx, scores, mask, drop, probs, dropped);

        Tensor probs_u = p.zeros(shape, out), dropped_u = p.zeros(shape, out);
        ops::attention_softmax_forward(p.ctx, scores, mask, probs_u);
        ops::dropout_forward(p.ctx, probs_u, drop, dropped_u);
        const std::string what =
            fmt::format("S {} offset {} {} -> {}", c.S, c.element_offset, dtype_name(in), dtype_name(out));
        EXPECT_EQ(p.host(probs), p.host(probs_u)) << what;
        EXPECT_EQ(p.host(dropped), p.host(dropped_u)) << what;

        const auto [want_p, want_d] = reference_forward(c, p.host(scores), p.host(probs), drop.rng, 40);
        p.expect_close(probs, want_p, "attention_probs_forward probs " + what);
        p.expect_close(dropped, want_d, "attention_probs_forward dropped " + what);
      }
}

TEST(ParityAttentionProbs, BackwardMakesTheMaskOnceBitForBitAsTheUnfusedOps) {
  Parity p;
  const float scale = 0.125f;
  for (const Case& c : kCases)
    for (DType dt : testing::float_dtypes()) {
      const Shape shape{c.B, c.heads, c.S, c.S};
      Tensor probs = p.zeros(shape, dt);
      ops::attention_softmax_forward(p.ctx, p.random(shape, DType::f32, 22, 2.0f), key_mask(p, c.B, c.S), probs);
      const Tensor dprobs = p.random(shape, DType::f32, 23);
      const ops::DropoutMask drop = mask_for(p, c, 9);

      Tensor dp = p.zeros(shape, DType::f32), dscores_u = p.zeros(shape, dt), dropped_u = p.zeros(shape, dt);
      ops::dropout_forward(p.ctx, probs, drop, dropped_u);
      ops::dropout_backward(p.ctx, dprobs, drop, dp);
      ops::softmax_backward(p.ctx, probs, dp, scale, dscores_u);
      const auto want_ds = p.host(dscores_u), want_dropped = p.host(dropped_u);

      const std::string what = fmt::format("S {} offset {} {}", c.S, c.element_offset, dtype_name(dt));
      Tensor dprobs_copy = p.zeros(shape, DType::f32), dscores = p.zeros(shape, dt), dropped = p.zeros(shape, dt);
      ops::copy(p.ctx, dprobs, dprobs_copy);
      ops::attention_probs_backward(p.ctx, probs, dprobs_copy, drop, scale, dscores, dropped);
      EXPECT_EQ(p.host(dscores), want_ds) << what;
      EXPECT_EQ(p.host(dropped), want_dropped) << what;

      // The scores' gradient over the probabilities themselves, as the attention layer writes it.
      ops::copy(p.ctx, dprobs, dprobs_copy);
      const auto hp = p.host(probs);
      ops::attention_probs_backward(p.ctx, probs, dprobs_copy, drop, scale, probs, dropped);
      EXPECT_EQ(p.host(probs), want_ds) << what << " in place";

      // Against float64: dp = mask * dprobs / (1 - p), dscores = scale * y * (dp - sum(y dp)).
      const auto hg = p.host(dprobs);
      std::vector<double> want(hg.size());
      const int64_t per = c.heads * c.S * c.S;
      for (int64_t r = 0; r < c.B * c.heads * c.S; ++r) {
        const int64_t b = r / (c.heads * c.S);
        std::vector<double> d(size_t(c.S));
        double dot = 0;
        for (int64_t k = 0; k < c.S; ++k) {
          const size_t i = size_t(r * c.S + k);
          const int64_t element = c.element_offset + int64_t(i) - b * per;
          const bool drops = testing::dropout_drops(drop.rng, uint64_t(9 + b), element, kDrop);
          d[size_t(k)] = drops ? 0.0 : hg[i] / (1.0 - kDrop);
          dot += hp[i] * d[size_t(k)];
        }
        for (int64_t k = 0; k < c.S; ++k)
          want[size_t(r * c.S + k)] = scale * hp[size_t(r * c.S + k)] * (d[size_t(k)] - dot);
      }
      p.expect_close(dscores, want, "attention_probs_backward " + what);
    }
}

TEST(ParityAttentionProbs, RowsThatDoNotSplitIntoTheSamplesAreAnError) {
  Parity p;
  const Case c{3, 2, 4, 0};
  const Shape shape{3, 2, 4, 4};
  Tensor probs = p.zeros(shape, DType::f32), dropped = p.zeros(shape, DType::f32);
  ops::DropoutMask drop = mask_for(p, c, 0);
  drop.samples = 5;  // 24 rows of 4
  EXPECT_THROW(ops::attention_probs_forward(p.ctx, probs, key_mask(p, 3, 4), drop, probs, dropped), Error);
  Tensor dprobs = p.zeros(shape, DType::f32);
  EXPECT_THROW(ops::attention_probs_backward(p.ctx, probs, dprobs, drop, 1.0f, probs, dropped), Error);
  Tensor wrong = p.zeros(shape, DType::bf16);
  drop.samples = 3;
  EXPECT_THROW(ops::attention_probs_backward(p.ctx, probs, dprobs, drop, 1.0f, probs, wrong), Error);
}

}  // namespace
}  // namespace kiln
