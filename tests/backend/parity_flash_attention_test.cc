// Parity of fused attention (ops::flash_attention_forward / _backward): against attention in
// float64 with the documented dropout mask, and against the unfused ops the attention layer runs
// (scores, attention_probs_forward / _backward, the products). On the CPU this is the kernel's
// block algorithm under the host tile policy; on CUDA the kernel itself (bf16 / f16).
#include <cmath>

#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using testing::Parity;

struct Case {
  int64_t B, heads, S, d;
  int64_t element_offset;  // a tensor-parallel rank's heads start at this element of a sample
  float p;                 // dropout
};

// Sequences across several 64-row blocks and not a multiple of a block, of 4 (Philox blocks that
// straddle rows) or of 16, and a multiple of 4 with dropout (a Philox block for four keys); every
// head dim the kernels are built for, and one padded to the next (48 to 64).
constexpr Case kCases[] = {{2, 2, 75, 32, 0, 0.25f},  {1, 3, 130, 64, 3 * 130 * 130, 0.1f},
                           {2, 1, 16, 16, 0, 0.0f},   {1, 2, 37, 128, 0, 0.5f},
                           {2, 2, 64, 64, 0, 0.0f},   {2, 2, 128, 48, 2 * 128 * 128, 0.1f}};
constexpr uint64_t kFirstSample = 11;

bool runs_on(const Parity& p, DType dt) { return dt != DType::f32 || p.ctx.device.kind != DeviceKind::cuda; }

// Every key of sample 0 is a token; sample b > 0 has its last 2b + 1 keys padded.
std::vector<int32_t> key_mask_values(int64_t B, int64_t S) {
  std::vector<int32_t> m(size_t(B * S), 1);
  for (int64_t b = 1; b < B; ++b)
    for (int64_t k = std::max<int64_t>(S - 2 * b - 1, 1); k < S; ++k) m[size_t(b * S + k)] = 0;
  return m;
}

// The case's tensors: q, k, v side by side in one (B*S, 3 width) tensor (rows of ld 3 width, as a
// fused QKV product writes them), context and gradients (B*S, width).
struct Attention {
  Case c;
  Tensor qkv, mask, dcontext;
  ops::DropoutMask drop;
  float scale;

  Attention(Parity& p, const Case& c, DType dt) : c(c) {
    const int64_t width = c.heads * c.d;
    qkv = p.random({c.B * c.S, 3 * width}, dt, 31, 1.5f);
    const std::vector<int32_t> m = key_mask_values(c.B, c.S);
    mask = p.to_device(Tensor::view(const_cast<int32_t*>(m.data()), {c.B, c.S}, DType::i32));
    dcontext = p.random({c.B * c.S, width}, dt, 32);
    drop = {c.p, RngStream{5, rng_stream(RngPurpose::dropout, 9, 0)}, p.sample_offset(int64_t(kFirstSample)), c.B,
            c.element_offset};
    scale = 1.0f / std::sqrt(float(c.d));
  }
  // q (0), k (1) or v (2) as heads.
  ops::MatView part(int which) const {
    ops::MatView v = ops::heads_view(qkv, c.B, c.S, c.heads * 3);
    v.batch[1] = c.heads;
    v.offset = which * c.heads * c.d;
    return v;
  }
  ops::MatView heads(const Tensor& t) const { return ops::heads_view(t, c.B, c.S, c.heads); }
};

// Element (b, h, i, c) of a (B*S, ld) host copy at column offset + h d + c.
struct HeadsOf {
  const std::vector<double>& v;
  int64_t S, d, ld, offset;
  double operator()(int64_t b, int64_t h, int64_t i, int64_t c) const {
    return v[size_t((b * S + i) * ld + offset + h * d + c)];
  }
};

// Attention in float64: context, lse and the gradients of q, k, v for dcontext.
struct Reference {
  std::vector<double> context, lse, dq, dk, dv;
};

Reference reference(Parity& p, const Attention& a) {
  const Case& c = a.c;
  const int64_t width = c.heads * c.d, S = c.S, d = c.d;
  const std::vector<double> hqkv = p.host(a.qkv), hdo = p.host(a.dcontext);
  const std::vector<int32_t> hm = key_mask_values(c.B, S);
  const HeadsOf q{hqkv, S, d, 3 * width, 0}, k{hqkv, S, d, 3 * width, width}, v{hqkv, S, d, 3 * width, 2 * width};
  const HeadsOf dout{hdo, S, d, width, 0};
  Reference r;
  for (auto* t : {&r.context, &r.dq, &r.dk, &r.dv}) t->assign(size_t(c.B * S * width), 0.0);
  r.lse.assign(size_t(c.B * c.heads * S), 0.0);
  const double keep_scale = 1.0 / (1.0 - double(c.p));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      std::vector<double> P(size_t(S * S)), Z(size_t(S * S)), dS(size_t(S * S));
      for (int64_t i = 0; i < S; ++i) {
        double mx = -1e300, sum = 0;
        std::vector<double> s(static_cast<size_t>(S));
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += q(b, h, i, e) * k(b, h, j, e);
          s[size_t(j)] = a.scale * dot + (hm[size_t(b * S + j)] ? 0.0 : -10000.0);
          mx = std::max(mx, s[size_t(j)]);
        }
        for (int64_t j = 0; j < S; ++j) sum += std::exp(s[size_t(j)] - mx);
        r.lse[size_t((b * c.heads + h) * S + i)] = mx + std::log(sum);
        double dot_row = 0;  // sum_j P dP
        std::vector<double> dp(static_cast<size_t>(S));
        for (int64_t j = 0; j < S; ++j) {
          const size_t ij = size_t(i * S + j);
          P[ij] = std::exp(s[size_t(j)] - mx) / sum;
          const int64_t element = c.element_offset + (h * S + i) * S + j;
          Z[ij] = c.p > 0 && testing::dropout_drops(a.drop.rng, kFirstSample + uint64_t(b), element, c.p)
                      ? 0.0
                      : keep_scale;
          double g = 0;
          for (int64_t e = 0; e < d; ++e) g += dout(b, h, i, e) * v(b, h, j, e);
          dp[size_t(j)] = g * Z[ij];
          dot_row += P[ij] * dp[size_t(j)];
        }
        for (int64_t j = 0; j < S; ++j) dS[size_t(i * S + j)] = a.scale * P[size_t(i * S + j)] * (dp[size_t(j)] - dot_row);
      }
      for (int64_t i = 0; i < S; ++i)
        for (int64_t e = 0; e < d; ++e) {
          double o = 0, gq = 0, gk = 0, gv = 0;
          for (int64_t j = 0; j < S; ++j) {
            o += P[size_t(i * S + j)] * Z[size_t(i * S + j)] * v(b, h, j, e);
            gq += dS[size_t(i * S + j)] * k(b, h, j, e);
            gk += dS[size_t(j * S + i)] * q(b, h, j, e);
            gv += P[size_t(j * S + i)] * Z[size_t(j * S + i)] * dout(b, h, j, e);
          }
          const size_t at = size_t((b * S + i) * width + h * d + e);
          r.context[at] = o, r.dq[at] = gq, r.dk[at] = gk, r.dv[at] = gv;
        }
    }
  return r;
}

std::string name_of(const Case& c, DType dt) {
  return fmt::format("B {} heads {} S {} d {} offset {} p {} {}", c.B, c.heads, c.S, c.d, c.element_offset, c.p,
                     dtype_name(dt));
}

// The fused ops' forward (context, lse) and backward (dq, dk, dv) of `a`.
struct Fused {
  Tensor context, lse, keep_bits, dq, dk, dv;
};

Fused fused(Parity& p, const Attention& a, DType dt) {
  const Case& c = a.c;
  const int64_t width = c.heads * c.d;
  Fused f{p.zeros({c.B * c.S, width}, dt),
          p.zeros({c.B, c.heads, c.S}, DType::f32),
          p.zeros({c.B, c.heads, c.S, ops::flash_keep_words(c.S)}, DType::i32),
          p.zeros({c.B * c.S, width}, dt),
          p.zeros({c.B * c.S, width}, dt),
          p.zeros({c.B * c.S, width}, dt)};
  ops::flash_attention_forward(p.ctx, a.part(0), a.part(1), a.part(2), a.mask, a.drop, a.scale, a.heads(f.context),
                               f.lse, f.keep_bits);
  ops::flash_attention_backward(p.ctx, a.part(0), a.part(1), a.part(2), a.heads(f.context), a.heads(a.dcontext),
                                a.mask, a.drop, a.scale, f.lse, f.keep_bits, a.heads(f.dq), a.heads(f.dk),
                                a.heads(f.dv));
  return f;
}

TEST(ParityFlashAttention, ForwardAndBackwardMatchFloat64AttentionWithItsDropoutMask) {
  Parity p;
  for (const Case& c : kCases)
    for (DType dt : testing::float_dtypes()) {
      if (!runs_on(p, dt)) continue;
      const Attention a(p, c, dt);
      const std::string what = name_of(c, dt);
      const auto [context, lse, keep_bits, dq, dk, dv] = fused(p, a, dt);
      const Reference r = reference(p, a);
      p.expect_close(context, r.context, "context " + what);
      p.expect_close(lse, r.lse, "lse " + what, 1e-5);
      // The gradients go through the context and dS rounded to the dtype: twice its rounding.
      const double tol = 2 * testing::parity_tolerance(dt);
      p.expect_close(dq, r.dq, "dq " + what, tol);
      p.expect_close(dk, r.dk, "dk " + what, tol);
      p.expect_close(dv, r.dv, "dv " + what, tol);
    }
}

// The unfused core as nn/attention.cc runs it: f32 scores, the probabilities in the dtype with
// their dropout, the products.
struct Unfused {
  Tensor context, dq, dk, dv;
};

Unfused unfused(Parity& p, const Attention& a, DType dt) {
  const Case& c = a.c;
  const Shape sxs{c.B, c.heads, c.S, c.S};
  const int64_t width = c.heads * c.d;
  Unfused u{p.zeros({c.B * c.S, width}, dt), p.zeros({c.B * c.S, width}, dt), p.zeros({c.B * c.S, width}, dt),
            p.zeros({c.B * c.S, width}, dt)};
  Tensor scores = p.zeros(sxs, DType::f32), probs = p.zeros(sxs, dt), dropped = p.zeros(sxs, dt);
  ops::MatmulOpts o;
  o.alpha = a.scale;
  ops::MatView kt = a.part(1);
  kt.trans = true;
  ops::matmul(p.ctx, a.part(0), kt, ops::per_head(scores), o);
  ops::attention_probs_forward(p.ctx, scores, a.mask, a.drop, probs, dropped);
  ops::matmul(p.ctx, ops::per_head(dropped), a.part(2), a.heads(u.context));
  Tensor dprobs = p.zeros(sxs, DType::f32), dscores = p.zeros(sxs, dt);
  ops::MatView vt = a.part(2);
  vt.trans = true;
  ops::matmul(p.ctx, a.heads(a.dcontext), vt, ops::per_head(dprobs));
  ops::attention_probs_backward(p.ctx, probs, dprobs, a.drop, a.scale, dscores, dropped);
  ops::matmul(p.ctx, ops::per_head(dropped, true), a.heads(a.dcontext), a.heads(u.dv));
  ops::matmul(p.ctx, ops::per_head(dscores), a.part(1), a.heads(u.dq));
  ops::matmul(p.ctx, ops::per_head(dscores, true), a.part(0), a.heads(u.dk));
  return u;
}

TEST(ParityFlashAttention, MatchesTheUnfusedOpsWithMasksAndDropout) {
  Parity p;
  for (const Case& c : kCases)
    for (DType dt : {DType::f32, DType::bf16}) {
      if (!runs_on(p, dt)) continue;
      const Attention a(p, c, dt);
      const std::string what = name_of(c, dt);
      const auto [context, lse, keep_bits, dq, dk, dv] = fused(p, a, dt);
      const Unfused u = unfused(p, a, dt);
      // A dropped set that differed in one element would move a context row by that probability's
      // share of v: far more than the two paths' roundings.
      const double tol = 2 * testing::parity_tolerance(dt);
      p.expect_close(context, p.host(u.context), "context " + what, tol);
      p.expect_close(dq, p.host(u.dq), "dq " + what, tol);
      p.expect_close(dk, p.host(u.dk), "dk " + what, tol);
      p.expect_close(dv, p.host(u.dv), "dv " + what, tol);
    }
}

TEST(ParityFlashAttention, HeadDimsTheTilesDoNotTakeAreAnError) {
  Parity p;
  for (int64_t d : {8, 24, 144}) {
    const Case c{1, 2, 8, d, 0, 0.0f};
    const Attention a(p, c, DType::bf16);
    Tensor context = p.zeros({c.S, c.heads * d}, DType::bf16), lse = p.zeros({1, c.heads, c.S}, DType::f32);
    Tensor no_bits;  // no dropout
    EXPECT_THROW(ops::flash_attention_forward(p.ctx, a.part(0), a.part(1), a.part(2), a.mask, a.drop, a.scale,
                                              a.heads(context), lse, no_bits),
                 Error)
        << d;
  }
}

}  // namespace
}  // namespace kiln
