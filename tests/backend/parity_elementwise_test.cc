// Parity of the typed elementwise ops (add, scale, bias add / grad, GELU, tanh, dropout) for
// f32 / bf16 / f16 storage against float64 references.
#include <cmath>

#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using testing::Parity;

const int64_t kShapes[][2] = {{1, 1}, {3, 7}, {17, 65}, {130, 257}, {64, 768}};

TEST(ParityElementwise, AddScaleAndBiasAddInEveryDtype) {
  Parity p;
  for (DType dt : testing::float_dtypes())
    for (const auto& s : kShapes) {
      const int64_t N = s[0], C = s[1];
      const Tensor a = p.random({N, C}, dt, 1), b = p.random({N, C}, dt, 2);
      const Tensor bias = p.random({C}, dt, 3);
      const auto ha = p.host(a), hb = p.host(b), hbias = p.host(bias);
      Tensor out = p.zeros({N, C}, dt);
      ops::add(p.ctx, a, b, out);
      std::vector<double> want(ha.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = ha[i] + hb[i];
      p.expect_close(out, want, "add");
      ops::scale(p.ctx, out, 0.5f, out);  // in place
      for (auto& w : want) w *= 0.5;
      p.expect_close(out, want, "scale");
      Tensor y = p.zeros({N, C}, dt);
      ops::copy(p.ctx, a, y);
      ops::bias_add(p.ctx, y, bias);
      for (size_t i = 0; i < want.size(); ++i) want[i] = ha[i] + hbias[i % size_t(C)];
      p.expect_close(y, want, "bias_add");
    }
}

TEST(ParityElementwise, AddTakesMixedDtypes) {
  Parity p;
  const Tensor a = p.random({33, 9}, DType::f32, 4), b = p.random({33, 9}, DType::bf16, 5);
  Tensor out = p.zeros({33, 9}, DType::f16);
  ops::add(p.ctx, a, b, out);
  const auto ha = p.host(a), hb = p.host(b);
  std::vector<double> want(ha.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = ha[i] + hb[i];
  p.expect_close(out, want, "f32 + bf16 -> f16");
  Tensor wrong = p.zeros({33, 8}, DType::f32);
  EXPECT_THROW(ops::add(p.ctx, a, b, wrong), Error);
}

TEST(ParityElementwise, BiasGradAccumulatesColumnSumsInF32) {
  Parity p;
  for (DType dt : testing::float_dtypes())
    for (const auto& s : kShapes) {
      const int64_t N = s[0], C = s[1];
      const Tensor dy = p.random({N, C}, dt, 6);
      Tensor db = p.random({C}, DType::f32, 7);
      const auto hdy = p.host(dy);
      std::vector<double> want = p.host(db);
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < C; ++c) want[size_t(c)] += hdy[size_t(r * C + c)];
      ops::bias_grad(p.ctx, dy, db);
      p.expect_close(db, want, fmt::format("bias_grad from {}", dtype_name(dt)), 1e-5);
    }
}

double gelu_ref(ops::GeluKind kind, double x) {
  if (kind == ops::GeluKind::erf) return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(ParityElementwise, GeluBothKindsForwardAndBackward) {
  Parity p;
  for (DType dt : testing::float_dtypes())
    for (auto kind : {ops::GeluKind::erf, ops::GeluKind::tanh})
      for (int64_t n : {1, 31, 20000}) {
        const Tensor x = p.random({n}, dt, 8, 3.0f), dy = p.random({n}, dt, 9);
        const auto hx = p.host(x), hdy = p.host(dy);
        std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
        for (size_t i = 0; i < size_t(n); ++i) {
          y_ref[i] = gelu_ref(kind, hx[i]);
          const double h = 1e-5;  // the float64 derivative by central difference is exact enough
          dx_ref[i] = hdy[i] * (gelu_ref(kind, hx[i] + h) - gelu_ref(kind, hx[i] - h)) / (2 * h);
        }
        Tensor y = p.zeros({n}, dt), dx = p.zeros({n}, dt);
        ops::gelu_forward(p.ctx, kind, x, y);
        ops::gelu_backward(p.ctx, kind, x, dy, dx);
        p.expect_close(y, y_ref, "gelu_forward");
        p.expect_close(dx, dx_ref, "gelu_backward");
      }
  // The two kinds really differ (by ~1e-4 at x = 2).
  Tensor x = p.from_host({2.0f}, {1}, DType::f32), ye = p.zeros({1}, DType::f32);
  Tensor yt = p.zeros({1}, DType::f32);
  ops::gelu_forward(p.ctx, ops::GeluKind::erf, x, ye);
  ops::gelu_forward(p.ctx, ops::GeluKind::tanh, x, yt);
  EXPECT_GT(std::abs(p.host(ye)[0] - p.host(yt)[0]), 5e-5);
}

TEST(ParityElementwise, TanhForwardAndBackward) {
  Parity p;
  for (DType dt : testing::float_dtypes()) {
    const int64_t n = 10001;
    const Tensor x = p.random({n}, dt, 10, 2.0f), dy = p.random({n}, dt, 11);
    Tensor y = p.zeros({n}, dt), dx = p.zeros({n}, dt);
    ops::tanh_forward(p.ctx, x, y);
    ops::tanh_backward(p.ctx, y, dy, dx);
    const auto hx = p.host(x), hy = p.host(y), hdy = p.host(dy);
    std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
    for (size_t i = 0; i < size_t(n); ++i) {
      y_ref[i] = std::tanh(hx[i]);
      dx_ref[i] = hdy[i] * (1 - hy[i] * hy[i]);  // from the stored y, as the op defines it
    }
    p.expect_close(y, y_ref, "tanh_forward");
    p.expect_close(dx, dx_ref, "tanh_backward");
  }
}

TEST(ParityElementwise, DropoutFollowsTheGlobalSampleKeyedMask) {
  Parity p;
  const RngStream rng{42, rng_stream(RngPurpose::dropout, 3, 0)};
  const float prob = 0.1f;
  const int64_t samples = 7, per = 30001;
  for (DType dt : testing::float_dtypes()) {
    const Tensor x = p.random({samples, per}, dt, 12), dy = p.random({samples, per}, dt, 13);
    Tensor y = p.zeros(x.shape, dt), dx = p.zeros(x.shape, dt);
    ops::dropout_forward(p.ctx, x, {prob, rng, p.sample_offset(100), samples}, y);
    ops::dropout_backward(p.ctx, dy, {prob, rng, p.sample_offset(100), samples}, dx);
    const auto hx = p.host(x), hdy = p.host(dy);
    std::vector<double> want_y(hx.size()), want_dx(hx.size());
    int64_t kept = 0;
    for (int64_t s = 0; s < samples; ++s)
      for (int64_t i = 0; i < per; ++i) {
        const size_t k = size_t(s * per + i);
        const bool drop = testing::dropout_drops(rng, 100 + uint64_t(s), i, prob);
        want_y[k] = drop ? 0.0 : hx[k] / (1.0 - prob);
        want_dx[k] = drop ? 0.0 : hdy[k] / (1.0 - prob);
        kept += !drop;
      }
    p.expect_close(y, want_y, "dropout_forward");
    p.expect_close(dx, want_dx, "dropout_backward");
    // Binomial(n, 0.9): standard deviation ~150; 6 sigma.
    EXPECT_NEAR(double(kept), 0.9 * samples * per, 900.0);
  }
  // One sample's mask is the same whatever micro-batch (offset, slot) carries it.
  const Tensor x = p.random({4, 100}, DType::f32, 14);
  Tensor all = p.zeros({4, 100}, DType::f32), two = p.zeros({2, 100}, DType::f32);
  ops::dropout_forward(p.ctx, x, {0.5f, rng, p.sample_offset(10), 4}, all);
  ops::dropout_forward(p.ctx, x.slice_rows(2, 4), {0.5f, rng, p.sample_offset(12), 2}, two);
  const auto ha = p.host(all), ht = p.host(two);
  EXPECT_EQ(std::vector<double>(ha.begin() + 200, ha.end()), ht);
  EXPECT_THROW(ops::dropout_forward(p.ctx, x, {0.5f, rng, p.sample_offset(0), 3}, all), Error);
}

// A tensor-parallel rank's slice of each sample (columns [off, off + 37) of 4 samples of 100,
// unaligned to the 4-element Philox blocks) gets the whole samples' mask.
TEST(ParityElementwise, DropoutOfASliceOfEachSampleMatchesTheWholeSamples) {
  Parity p;
  const RngStream rng{42, rng_stream(RngPurpose::dropout, 5, 0)};
  const Tensor x = p.random({4, 100}, DType::f32, 15);
  Tensor all = p.zeros({4, 100}, DType::f32);
  ops::dropout_forward(p.ctx, x, {0.3f, rng, p.sample_offset(8), 4}, all);
  const auto hx = p.host(x), ha = p.host(all);
  for (int64_t off : {0, 3, 50, 63}) {
    std::vector<float> slice;
    std::vector<double> want;
    for (int64_t s = 0; s < 4; ++s)
      for (int64_t i = off; i < off + 37; ++i) {
        slice.push_back(float(hx[size_t(s * 100 + i)]));
        want.push_back(ha[size_t(s * 100 + i)]);
      }
    const Tensor xs = p.from_host(slice, {4, 37}, DType::f32);
    Tensor y = p.zeros({4, 37}, DType::f32), dx = p.zeros({4, 37}, DType::f32);
    ops::dropout_forward(p.ctx, xs, {0.3f, rng, p.sample_offset(8), 4, off}, y);
    ops::dropout_backward(p.ctx, xs, {0.3f, rng, p.sample_offset(8), 4, off}, dx);
    EXPECT_EQ(p.host(y), want) << "offset " << off;
    EXPECT_EQ(p.host(dx), want) << "offset " << off;
  }
}

}  // namespace
}  // namespace kiln
