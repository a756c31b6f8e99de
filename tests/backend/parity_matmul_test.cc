// Parity of the typed matmul: every operand dtype, f32 or operand-dtype output, transposes,
// padded leading dimensions, two strided batch dimensions (attention's per-head views),
// alpha / beta, bias and activation post-ops, and the f32 fallback for CPUs where oneDNN has
// no bf16 / f16 primitive.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

#include "kiln/backend/cpu/matmul.h"
#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using ops::Activation;
using ops::MatView;
using testing::Parity;

// Element (b0, b1, r, c) of op(v), read from the host values of v.t.
double at(const MatView& v, const std::vector<double>& h, int64_t b0, int64_t b1, int64_t r,
          int64_t c) {
  const int64_t sr = v.trans ? c : r, sc = v.trans ? r : c;
  return h[size_t(v.offset + b0 * v.batch_stride[0] + b1 * v.batch_stride[1] + sr * v.ld + sc)];
}

double activate(Activation act, double x) {
  switch (act) {
    case Activation::relu: return x > 0 ? x : 0;
    case Activation::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::gelu_tanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return x;
  }
}

// The float64 result of ops::matmul(a, b, c, o) over c's whole tensor (elements outside the
// view keep their values).
std::vector<double> reference(Parity& p, const MatView& a, const MatView& b, const MatView& c,
                              const ops::MatmulOpts& o) {
  const auto ha = p.host(a.t), hb = p.host(b.t);
  std::vector<double> out = p.host(c.t);
  const std::vector<double> bias = o.bias ? p.host(*o.bias) : std::vector<double>{};
  const int64_t K = a.trans ? a.rows : a.cols;
  for (int64_t b0 = 0; b0 < c.batch[0]; ++b0)
    for (int64_t b1 = 0; b1 < c.batch[1]; ++b1)
      for (int64_t m = 0; m < c.rows; ++m)
        for (int64_t n = 0; n < c.cols; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += at(a, ha, b0, b1, m, k) * at(b, hb, b0, b1, k, n);
          double v = o.alpha * acc + (o.bias ? bias[size_t(n)] : 0.0);
          v = activate(o.act, v);
          double& dst = out[size_t(c.offset + b0 * c.batch_stride[0] + b1 * c.batch_stride[1] +
                                   m * c.ld + n)];
          dst = v + (o.beta != 0 ? o.beta * dst : 0.0);
        }
  return out;
}

// A (rows, cols) matrix view with leading dimension cols + pad inside a fresh random tensor.
MatView padded(Parity& p, int64_t rows, int64_t cols, int64_t pad, DType dtype, uint32_t id,
               bool trans) {
  MatView v;
  v.t = p.random({rows * (cols + pad) + 3}, dtype, id);
  v.offset = 3;
  v.rows = rows;
  v.cols = cols;
  v.ld = cols + pad;
  v.trans = trans;
  return v;
}

double tolerance(DType out) { return out == DType::f32 ? 1e-4 : testing::parity_tolerance(out); }

TEST(ParityMatmul, EveryDtypeTransposeAlphaBetaAndBias) {
  Parity p;
  const int64_t cases[][3] = {{1, 1, 1}, {7, 13, 5}, {64, 48, 33}, {129, 65, 257}, {3, 200, 2}};
  uint32_t id = 1;
  for (DType dt : testing::float_dtypes())
    for (DType out : {DType::f32, dt})
      for (const auto& cs : cases)
        for (int ta = 0; ta < 2; ++ta)
          for (int tb = 0; tb < 2; ++tb) {
            const int64_t M = cs[0], N = cs[1], K = cs[2];
            const MatView a = ta ? padded(p, K, M, 3, dt, ++id, true) : padded(p, M, K, 2, dt, ++id, false);
            const MatView b = tb ? padded(p, N, K, 1, dt, ++id, true) : padded(p, K, N, 5, dt, ++id, false);
            const MatView c = padded(p, M, N, 4, out, ++id, false);
            const uint32_t bias_id = ++id;
            const Tensor bias = p.random({N}, bias_id % 2 ? DType::f32 : dt, bias_id);
            ops::MatmulOpts o;
            o.beta = (ta + tb) % 2 ? 1.0f : 0.0f;
            if (tb) o.bias = &bias;
            else o.alpha = 0.75f;
            const auto want = reference(p, a, b, c, o);
            ops::matmul(p.ctx, a, b, c, o);
            p.expect_close(c.t, want,
                           fmt::format("{} -> {} {}x{}x{} ta={} tb={}", dtype_name(dt),
                                       dtype_name(out), M, N, K, ta, tb),
                           tolerance(out));
          }
}

// A linear layer's weight gradient written (not added): dW (out, in) f32 = dy^T x, which the CPU
// backend runs as inner-product backward-weights where the rows are dense; then with padded
// rows, and with beta or alpha, which keep the matmul primitive.
TEST(ParityMatmul, WeightGradientProductsWrittenOrAdded) {
  Parity p;
  const int64_t cases[][3] = {{1, 1, 1}, {48, 64, 33}, {257, 129, 65}, {5, 300, 2}};  // out, in, tokens
  uint32_t id = 500;
  for (DType dt : testing::float_dtypes())
    for (const auto& cs : cases)
      for (int variant = 0; variant < 4; ++variant) {  // dense, padded, padded with beta, with alpha
        const int64_t M = cs[0], N = cs[1], K = cs[2], pad = variant > 0 ? variant : 0;
        const MatView dy = padded(p, K, M, pad, dt, ++id, true), x = padded(p, K, N, 2 * pad, dt, ++id, false);
        const MatView dw = padded(p, M, N, pad, DType::f32, ++id, false);
        ops::MatmulOpts o;
        if (variant == 2) o.beta = 1.0f;
        if (variant == 3) o.alpha = 0.5f;
        const auto want = reference(p, dy, x, dw, o);
        ops::matmul(p.ctx, dy, x, dw, o);
        p.expect_close(dw.t, want,
                       fmt::format("{} {}x{}x{} alpha {} beta {}", dtype_name(dt), M, N, K, o.alpha, o.beta),
                       tolerance(DType::f32));
      }
}

// A linear layer's weight gradient with its bias gradient in the same op: dW as without it, and db
// the separate bias_grad's (bit for bit on the CPU; to f32 rounding where cuBLASLt's epilogue sums).
TEST(ParityMatmul, BiasGradientRidesTheWeightGradient) {
  Parity p;
  const int64_t cases[][3] = {{1, 1, 1}, {48, 64, 33}, {70, 40, 200}, {5, 300, 130}};  // out, in, tokens
  uint32_t id = 700;
  for (DType dt : testing::float_dtypes())
    for (const auto& cs : cases)
      for (float beta : {0.0f, 1.0f}) {
        const int64_t M = cs[0], N = cs[1], K = cs[2];
        const Tensor dy = p.random({K, M}, dt, ++id), x = p.random({K, N}, dt, ++id);
        const Tensor dw0 = p.random({M, N}, DType::f32, ++id), db0 = p.random({M}, DType::f32, ++id);
        Tensor dw = p.zeros({M, N}, DType::f32), db = p.zeros({M}, DType::f32);
        Tensor dw_apart = p.zeros({M, N}, DType::f32), db_apart = p.zeros({M}, DType::f32);
        for (Tensor* t : {&dw, &dw_apart}) ops::copy(p.ctx, dw0, *t);
        for (Tensor* t : {&db, &db_apart}) ops::copy(p.ctx, db0, *t);
        ops::MatmulOpts o;
        o.beta = beta;
        ops::matmul(p.ctx, ops::mat(dy, true), ops::mat(x), ops::mat(dw_apart), o);
        ops::bias_grad(p.ctx, dy, db_apart);
        o.bias_grad = &db;
        ops::matmul(p.ctx, ops::mat(dy, true), ops::mat(x), ops::mat(dw), o);
        const std::string what = fmt::format("{} {}x{}x{} beta {}", dtype_name(dt), M, N, K, beta);
        if (p.ctx.device.is_cpu()) {
          EXPECT_EQ(p.host(dw), p.host(dw_apart)) << what;
          EXPECT_EQ(p.host(db), p.host(db_apart)) << what;
        } else {  // the epilogue's algorithm may sum the products in another order
          p.expect_close(dw, p.host(dw_apart), what, tolerance(DType::f32));
          p.expect_close(db, p.host(db_apart), what, 1e-5);
        }
      }
}

// Three products of one input with weights and biases at one stride (attention's q, k and v
// projections from the flat parameter buffers) in one call: each as its unbatched product with
// its bias (bit for bit on the CPU, which runs them one by one).
TEST(ParityMatmul, BatchesWithBiasesOfTheirOwn) {
  Parity p;
  const int64_t N = 37, in = 24, out = 20, stride = 16 * 32;  // weight (out, in) then bias, 16-aligned
  uint32_t id = 900;
  for (DType dt : testing::float_dtypes()) {
    const Tensor x = p.random({N, in}, dt, ++id), flat = p.random({3 * stride}, dt, ++id);
    const auto at = [&](int64_t element, Shape shape) {
      return Tensor::view(static_cast<std::byte*>(flat.data) + element * int64_t(dtype_size(dt)), shape, dt,
                          flat.device);
    };
    Tensor y = p.zeros({3 * N, out}, dt), want = p.zeros({3 * N, out}, dt);
    for (int64_t i = 0; i < 3; ++i) {
      ops::MatmulOpts o;
      const Tensor bias = at(i * stride + out * in, {out});
      o.bias = &bias;
      Tensor rows = want.slice_rows(i * N, (i + 1) * N);
      ops::matmul(p.ctx, ops::mat(x), ops::mat(at(i * stride, {out, in}), true), ops::mat(rows), o);
    }
    ops::MatView a = ops::mat(x), w = ops::mat(at(0, {out, in}), true), c = ops::mat(y);
    w.t = at(0, {2 * stride + out * in});
    a.batch[0] = w.batch[0] = c.batch[0] = 3;
    w.batch_stride[0] = stride;
    c.rows = N, c.batch_stride[0] = N * out;
    const Tensor biases = at(out * in, {2 * stride + out});
    ops::MatmulOpts o;
    o.bias = &biases;
    o.bias_batch_stride = stride;
    ops::matmul(p.ctx, a, w, c, o);
    if (p.ctx.device.is_cpu()) EXPECT_EQ(p.host(y), p.host(want)) << dtype_name(dt);
    else p.expect_close(y, p.host(want), std::string(dtype_name(dt)), tolerance(dt));
    o.bias_batch_stride = out - 1;  // the biases would overlap
    EXPECT_THROW(ops::matmul(p.ctx, a, w, c, o), Error);
  }
}

// q, k and v's weight gradients with their bias gradients in one call: three dy's one after
// another, the same x for each (batch stride 0), the gradients at one stride of a flat f32 buffer
// as the parameter store lays them out; each as its unbatched product (bit for bit on the CPU).
TEST(ParityMatmul, BatchedWeightGradientsWithBiasGradientsOfTheirOwn) {
  Parity p;
  const int64_t tokens = 45, in = 24, out = 20, stride = 16 * 32;  // weight (out, in) then bias, 16-aligned
  uint32_t id = 950;
  for (DType dt : testing::float_dtypes())
    for (float beta : {0.0f, 1.0f}) {
      const Tensor dy = p.random({3 * tokens, out}, dt, ++id), x = p.random({tokens, in}, dt, ++id);
      const Tensor flat0 = p.random({3 * stride}, DType::f32, ++id);
      Tensor flat = p.zeros({3 * stride}, DType::f32), want = p.zeros({3 * stride}, DType::f32);
      for (Tensor* t : {&flat, &want}) ops::copy(p.ctx, flat0, *t);
      const auto at = [](const Tensor& t, int64_t element, Shape shape) {
        return Tensor::view(static_cast<float*>(t.data) + element, shape, DType::f32, t.device);
      };
      ops::MatmulOpts o;
      o.beta = beta;
      for (int64_t i = 0; i < 3; ++i) {
        const Tensor dyi = dy.slice_rows(i * tokens, (i + 1) * tokens);
        Tensor dw = at(want, i * stride, {out, in}), db = at(want, i * stride + out * in, {out});
        ops::MatmulOpts one = o;
        one.bias_grad = &db;
        ops::matmul(p.ctx, ops::mat(dyi, true), ops::mat(x), ops::mat(dw), one);
      }
      ops::MatView a = ops::mat(dy, true), b = ops::mat(x), c = ops::mat(at(flat, 0, {out, in}));
      a.rows = tokens, a.batch[0] = 3, a.batch_stride[0] = tokens * out;
      b.batch[0] = 3;  // batch stride 0: the same x for each
      c.t = at(flat, 0, {2 * stride + out * in});
      c.batch[0] = 3, c.batch_stride[0] = stride;
      Tensor dbs = at(flat, out * in, {2 * stride + out});
      o.bias_grad = &dbs;
      o.bias_batch_stride = stride;
      ops::matmul(p.ctx, a, b, c, o);
      const std::string what = fmt::format("{} beta {}", dtype_name(dt), beta);
      if (p.ctx.device.is_cpu()) EXPECT_EQ(p.host(flat), p.host(want)) << what;
      else p.expect_close(flat, p.host(want), what, 1e-5);
      o.bias_batch_stride = out - 1;  // the sums would overlap
      EXPECT_THROW(ops::matmul(p.ctx, a, b, c, o), Error) << what;
      o.bias_batch_stride = 0;  // three dy's, one bias gradient
      Tensor db = at(flat, out * in, {out});
      o.bias_grad = &db;
      EXPECT_THROW(ops::matmul(p.ctx, a, b, c, o), Error) << what;
    }
}

TEST(ParityMatmul, BiasGradientNeedsAWholeTransposedDy) {
  Parity p;
  const Tensor dy = p.random({6, 4}, DType::f32, 800), x = p.random({6, 3}, DType::f32, 801);
  const Tensor bias = p.random({3}, DType::f32, 802), dyt = p.random({4, 6}, DType::f32, 803);
  Tensor dw = p.zeros({4, 3}, DType::f32), db = p.zeros({4}, DType::f32), db3 = p.zeros({3}, DType::f32);
  ops::MatmulOpts o;
  o.bias_grad = &db3;
  ops::MatView part = ops::mat(dy, true);
  part.rows = 6, part.cols = 3, part.ld = 4;  // three of dy's four columns
  Tensor dw3 = p.zeros({3, 3}, DType::f32);
  EXPECT_THROW(ops::matmul(p.ctx, part, ops::mat(x), ops::mat(dw3), o), Error);
  EXPECT_THROW(ops::matmul(p.ctx, ops::mat(dy, true), ops::mat(x), ops::mat(dw), o), Error);  // db (3), 4 rows
  o.bias_grad = &db;
  EXPECT_THROW(ops::matmul(p.ctx, ops::mat(dyt), ops::mat(x), ops::mat(dw), o), Error);  // A not read transposed
  o.bias = &bias;
  EXPECT_THROW(ops::matmul(p.ctx, ops::mat(dy, true), ops::mat(x), ops::mat(dw), o), Error);
  EXPECT_EQ(p.host(db), std::vector<double>(4, 0.0));  // nothing ran
}

// Attention's layout: q, k, v (B*S, H) read per head without copies; scores (B, heads, S, S).
TEST(ParityMatmul, PerHeadViewsOfRowMajorActivations) {
  Parity p;
  const int64_t B = 3, S = 7, heads = 4, d = 5, H = heads * d;
  for (DType dt : testing::float_dtypes()) {
    const Tensor q = p.random({B * S, H}, dt, 10), k = p.random({B * S, H}, dt, 11);
    Tensor scores = p.random({B, heads, S, S}, DType::f32, 12);
    ops::MatmulOpts o;
    o.alpha = 0.5f;
    const MatView qv = ops::heads_view(q, B, S, heads), kv = ops::heads_view(k, B, S, heads, true);
    const MatView sv = ops::per_head(scores);
    auto want = reference(p, qv, kv, sv, o);
    ops::matmul(p.ctx, qv, kv, sv, o);
    p.expect_close(scores, want, "q k^T per head", 1e-4);
    // context (B*S, H) = probs v per head, written back into the row layout.
    const Tensor probs = p.random({B, heads, S, S}, dt, 13);
    Tensor ctx = p.random({B * S, H}, dt, 14);
    const MatView cv = ops::heads_view(ctx, B, S, heads);
    want = reference(p, ops::per_head(probs), ops::heads_view(k, B, S, heads), cv, {});
    ops::matmul(p.ctx, ops::per_head(probs), ops::heads_view(k, B, S, heads), cv);
    p.expect_close(ctx, want, "probs v per head", tolerance(dt));
    // dk = dscores^T q per head: a transposed per-head operand.
    Tensor dk = p.random({B * S, H}, DType::f32, 15);
    const MatView dkv = ops::heads_view(dk, B, S, heads);
    want = reference(p, ops::per_head(probs, true), ops::heads_view(q, B, S, heads), dkv, {});
    ops::matmul(p.ctx, ops::per_head(probs, true), ops::heads_view(q, B, S, heads), dkv);
    p.expect_close(dk, want, "probs^T q per head", 1e-4);
  }
}

TEST(ParityMatmul, BiasAndActivationPostOps) {
  Parity p;
  const int64_t M = 37, N = 70, K = 45;
  for (DType dt : testing::float_dtypes())
    for (Activation act : {Activation::relu, Activation::gelu_erf, Activation::gelu_tanh}) {
      const Tensor x = p.random({M, K}, dt, 20), w = p.random({N, K}, dt, 21, 0.3f);
      const Tensor bias = p.random({N}, dt, 22);
      Tensor y = p.zeros({M, N}, dt);
      ops::MatmulOpts o;
      o.bias = &bias;
      o.act = act;
      const auto want = reference(p, ops::mat(x), ops::mat(w, true), ops::mat(y), o);
      ops::matmul(p.ctx, ops::mat(x), ops::mat(w, true), ops::mat(y), o);
      p.expect_close(y, want, fmt::format("activation {}", int(act)), tolerance(dt));
    }
}

TEST(ParityMatmul, ForcedF32FallbackMatchesForBf16AndF16) {
  Parity p;
  const int64_t B = 2, S = 9, heads = 3, H = 12;
  for (DType dt : {DType::bf16, DType::f16}) {
    ops::cpu::force_matmul_f32_fallback(true);
    const Tensor a = p.random({B * S, H}, dt, 30), b = p.random({B * S, H}, dt, 31);
    Tensor c = p.random({B, heads, S, S}, dt, 32);
    ops::MatmulOpts o;
    o.alpha = 0.25f;
    o.beta = 1.0f;
    const MatView av = ops::heads_view(a, B, S, heads), bv = ops::heads_view(b, B, S, heads, true);
    const auto want = reference(p, av, bv, ops::per_head(c), o);
    ops::matmul(p.ctx, av, bv, ops::per_head(c), o);
    p.expect_close(c, want, "fallback, strided, beta", tolerance(dt));
    const Tensor w = p.random({5, H}, dt, 33), bias = p.random({5}, dt, 34);
    Tensor y = p.zeros({B * S, 5}, DType::f32);
    ops::MatmulOpts ob;
    ob.bias = &bias;
    ob.act = Activation::gelu_erf;
    const auto want_y = reference(p, ops::mat(a), ops::mat(w, true), ops::mat(y), ob);
    ops::matmul(p.ctx, ops::mat(a), ops::mat(w, true), ops::mat(y), ob);
    ops::cpu::force_matmul_f32_fallback(false);
    p.expect_close(y, want_y, "fallback, bias and GELU", 1e-4);
  }
}

// The fallback's f32 copies are the op's own scratch: handed back when it returns, so that a step
// of many products (or an evaluation of many batches) does not stack them up in the arena.
TEST(ParityMatmul, F32FallbackHandsItsCopiesBack) {
  Arena arena;
  Context ctx;
  ctx.scratch = &arena;
  Tensor a = Tensor::empty({64, 48}, DType::bf16), w = Tensor::empty({32, 48}, DType::bf16),
         y = Tensor::empty({64, 32}, DType::bf16);
  ops::fill(ctx, a, 0.5f);
  ops::fill(ctx, w, 0.25f);
  ops::cpu::force_matmul_f32_fallback(true);
  for (int call = 0; call < 3; ++call) {
    ops::matmul(ctx, ops::mat(a), ops::mat(w, true), ops::mat(y));
    EXPECT_EQ(arena.in_use(), 0u) << "call " << call;
  }
  ops::cpu::force_matmul_f32_fallback(false);
  EXPECT_GE(arena.high_water(), size_t((64 + 32) * 48 + 64 * 32) * 4);  // it did take f32 copies
  EXPECT_EQ(bf16_to_f32(y.ptr<uint16_t>()[0]), 48 * 0.125f);
}

// On an AVX2-only CPU oneDNN builds no bf16 matmul: kiln must say so once and compute anyway.
// ONEDNN_MAX_CPU_ISA=AVX2 makes this machine look like one; the parity test above, run in a
// child process so limited, must pass and print the notice.
TEST(ParityMatmul, Avx2OnlyCpuFallsBackWithANotice) {
  if (std::getenv("KILN_IN_AVX2_CHILD")) GTEST_SKIP() << "already the child";
  // The pid in the name: ctest runs this test in two processes at once (ParityMatmul, ParityOnSim).
  const std::string log = ::testing::TempDir() + "kiln_avx2_matmul." + std::to_string(getpid()) + ".log";
  const std::string cmd = "KILN_IN_AVX2_CHILD=1 ONEDNN_MAX_CPU_ISA=AVX2 /proc/" +
                          std::to_string(getpid()) +
                          "/exe --gtest_filter=ParityMatmul.EveryDtypeTransposeAlphaBetaAndBias:"
                          "ParityMatmul.PerHeadViewsOfRowMajorActivations >" + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(log).rdbuf();
  EXPECT_EQ(rc, 0) << out.str();
  EXPECT_NE(out.str().find("kiln: oneDNN has no bf16 matmul on this CPU"), std::string::npos)
      << out.str();
  std::remove(log.c_str());
}

TEST(ParityMatmul, RepeatedCallsAreBitwiseIdentical) {
  Parity p;
  for (DType dt : testing::float_dtypes()) {
    const Tensor a = p.random({200, 400}, dt, 40), b = p.random({300, 400}, dt, 41);
    Tensor c1 = p.zeros({200, 300}, DType::f32), c2 = p.zeros({200, 300}, DType::f32);
    ops::matmul(p.ctx, ops::mat(a), ops::mat(b, true), ops::mat(c1));
    ops::matmul(p.ctx, ops::mat(a), ops::mat(b, true), ops::mat(c2));
    EXPECT_EQ(p.host(c1), p.host(c2)) << dtype_name(dt);
  }
}

TEST(ParityMatmul, RejectsMismatchedOperands) {
  Parity p;
  const Tensor a = p.random({4, 5}, DType::f32, 50), b16 = p.random({5, 6}, DType::bf16, 51);
  const Tensor b = p.random({5, 6}, DType::f32, 52);
  Tensor c = p.zeros({4, 6}, DType::f32), c16 = p.zeros({4, 6}, DType::f16);
  EXPECT_THROW(ops::matmul(p.ctx, ops::mat(a), ops::mat(b16), ops::mat(c)), Error);
  EXPECT_THROW(ops::matmul(p.ctx, ops::mat(a), ops::mat(b), ops::mat(c16)), Error);
  EXPECT_THROW(ops::matmul(p.ctx, ops::mat(a), ops::mat(b, true), ops::mat(c)), Error);
  const Tensor bias = p.random({5}, DType::f32, 53);
  ops::MatmulOpts o;
  o.bias = &bias;
  EXPECT_THROW(ops::matmul(p.ctx, ops::mat(a), ops::mat(b), ops::mat(c), o), Error);
  const Tensor bias6 = p.random({6}, DType::f32, 54);
  o.bias = &bias6;
  o.alpha = 0.5f;
  EXPECT_THROW(ops::matmul(p.ctx, ops::mat(a), ops::mat(b), ops::mat(c), o), Error);
  MatView too_far = ops::mat(a);
  too_far.offset = 1;
  EXPECT_THROW(ops::matmul(p.ctx, too_far, ops::mat(b), ops::mat(c)), Error);
}

}  // namespace
}  // namespace kiln
