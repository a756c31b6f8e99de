// The span bodies of backend/cuda/elementwise_bodies.h (16-byte packs, vec_access.h) run on the
// CPU over their launch's grid, bitwise against the scalar bodies they replace (one element per
// item: load, the f32 arithmetic, store), with short last spans and operands at unaligned
// offsets (element by element), in every storage type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/vec_access.h"
#include "cuda_bodies.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::random_normal;

// Lengths around a span (8 bf16 / 4 f32) and a launch's 256 threads (the grid's strides:
// CudaBodies.GridCoversEveryItemOnce; an item's result does not depend on the grid).
const int64_t kLengths[] = {1, 3, 4, 7, 8, 9, 255, 4099, 3 * 2048 + 13};

TEST(CudaSpans, SpansCoverEveryElementOnceAndTheLastIsShort) {
  for (int W : {4, 8})
    for (int64_t n : {1, 7, 8, 9, 4099}) {
      std::vector<int> hits(size_t(n), 0);
      run_all(span_count(n, W), [&](int64_t k) {
        const Span s = span_of(k, W, n, true);
        EXPECT_EQ(s.whole, s.count == W);
        for (int j = 0; j < s.count; ++j) ++hits[size_t(s.first + j)];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)], 1) << "element " << i << " of " << n;
    }
  EXPECT_FALSE(span_of(0, 8, 8, false).whole);
}

TEST(CudaSpans, PacksNeedEveryOperandAligned) {
  alignas(16) uint16_t a[16];
  alignas(16) float b[8];
  EXPECT_TRUE(packs_aligned(a, b));
  EXPECT_FALSE(packs_aligned(a + 1, b));
  EXPECT_FALSE(packs_aligned(a, b + 2));
  EXPECT_TRUE(packs_aligned(a + 8, b + 4));
}

// Special values too: NaN, infinities, an f16 subnormal, values that round up across a binade.
TEST(CudaSpans, PacksLoadAndRoundAsElementAccess) {
  std::vector<float> v = random_normal(64, 21, 100.0f);
  v[0] = NAN, v[1] = INFINITY, v[2] = -INFINITY, v[3] = 1e-7f, v[4] = 65520.0f, v[5] = 1.00390625f;
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kSpanWidth<T>;
    const std::vector<T> src = stored<T>(v);
    std::vector<T> packed(src.size()), elements(src.size());
    for (size_t q = 0; q + W <= v.size(); q += W) {
      float got[W], scalar[W];
      load_packs<W>(src.data() + q, got);
      load_span(src.data() + q, {0, W, false}, scalar);
      for (int j = 0; j < W; ++j) EXPECT_EQ(f32_bits(got[j]), f32_bits(load(src[q + j])));
      float from[W];
      for (int j = 0; j < W; ++j) from[j] = v[q + j] * 1.001f;
      store_packs<W>(packed.data() + q, from);
      store_span(elements.data() + q, {0, W, false}, from);
      for (int j = 0; j < W; ++j) EXPECT_EQ(f32_bits(scalar[j]), f32_bits(got[j]));
    }
    EXPECT_TRUE(same_bits(packed, elements));
  });
}

// Operands of n elements at `offset` elements into their storage (1: no operand aligned).
template <typename T>
struct Operand {
  std::vector<T> storage;
  int64_t offset;
  Operand(const std::vector<float>& v, int64_t offset_) : offset(offset_) {
    storage = stored<T>(std::vector<float>(size_t(offset), 0.0f));
    const std::vector<T> values = stored<T>(v);
    storage.insert(storage.end(), values.begin(), values.end());
  }
  T* data() { return storage.data() + offset; }
  std::vector<T> elements() const { return {storage.begin() + offset, storage.end()}; }
};

// For every length, offset and storage type: run(n, offset, T{}) checks its body.
template <typename Fn>
void for_each_case(Fn run) {
  for (int64_t n : kLengths)
    for (int64_t offset : {0, 1})
      for_each_type([&](auto tag) { run(n, offset, tag); });
}

TEST(CudaSpans, UnaryBodiesAreTheScalarBodiesBitForBit) {
  for_each_case([](int64_t n, int64_t offset, auto tag) {
    using T = decltype(tag);
    Operand<T> x(random_normal(n, 22, 3.0f), offset), y(std::vector<float>(size_t(n)), offset);
    Operand<float> xf(random_normal(n, 23, 3.0f), offset);
    const bool aligned = packs_aligned(x.data(), y.data(), xf.data());
    EXPECT_EQ(aligned, offset == 0);
    const std::vector<T> xs = x.elements();
    const std::vector<float> xfs = xf.elements();
    auto expect_each = [&](const char* what, auto f, const auto& in) {
      std::vector<T> want(static_cast<size_t>(n));
      for (size_t i = 0; i < want.size(); ++i) want[i] = store<T>(f(load(in[i])));
      EXPECT_TRUE(same_bits(y.elements(), want)) << what << " n " << n << " offset " << offset;
    };
    run_spans(CastBody<float, T>{xf.data(), y.data(), n, aligned});
    expect_each("cast", [](float v) { return v; }, xfs);
    run_spans(ScaleBody<T, T>{x.data(), y.data(), n, aligned, Scaled{0.3f}});
    expect_each("scale", [](float v) { return 0.3f * v; }, xs);
    for (bool tanh_form : {false, true}) {
      run_spans(GeluForwardSpanBody<T, T>{x.data(), y.data(), n, aligned, Gelu{tanh_form}});
      expect_each("gelu", [&](float v) { return gelu(tanh_form, v); }, xs);
    }
    run_spans(TanhForwardSpanBody<T>{x.data(), y.data(), n, aligned});
    std::vector<T> old(static_cast<size_t>(n));
    run_all(n, TanhForwardBody{ptr(xs), ptr(old)});
    EXPECT_TRUE(same_bits(y.elements(), old)) << "tanh n " << n;
    run_spans(ReluForwardSpanBody<T>{x.data(), y.data(), n, aligned});
    run_all(n, ReluForwardBody{ptr(xs), ptr(old)});
    EXPECT_TRUE(same_bits(y.elements(), old)) << "relu n " << n;
  });
}

TEST(CudaSpans, BinaryBodiesAreTheScalarBodiesBitForBit) {
  for_each_case([](int64_t n, int64_t offset, auto tag) {
    using T = decltype(tag);
    Operand<T> a(random_normal(n, 24, 2.0f), offset), b(random_normal(n, 25), offset);
    Operand<float> af(random_normal(n, 26), offset);
    Operand<T> out(std::vector<float>(size_t(n)), offset);
    const bool aligned = packs_aligned(a.data(), b.data(), af.data(), out.data());
    const std::vector<T> as = a.elements(), bs = b.elements();
    const std::vector<float> afs = af.elements();
    auto expect_each = [&](const char* what, auto f, const auto& first) {
      std::vector<T> want(static_cast<size_t>(n));
      for (size_t i = 0; i < want.size(); ++i) want[i] = store<T>(f(load(first[i]), load(bs[i])));
      EXPECT_TRUE(same_bits(out.elements(), want)) << what << " n " << n << " offset " << offset;
    };
    run_spans(AddBody<float, T, T>{af.data(), b.data(), out.data(), n, aligned});
    expect_each("add", [](float u, float v) { return u + v; }, afs);
    for (bool tanh_form : {false, true}) {
      run_spans(GeluBackwardBody<T, T, T>{a.data(), b.data(), out.data(), n, aligned, GeluGrad{tanh_form}});
      expect_each("gelu_backward", [&](float x, float g) { return g * gelu_grad(tanh_form, x); }, as);
    }
    std::vector<T> old(static_cast<size_t>(n));
    run_spans(TanhBackwardSpanBody<T>{a.data(), b.data(), out.data(), n, aligned});
    run_all(n, TanhBackwardBody{ptr(as), ptr(bs), ptr(old)});
    EXPECT_TRUE(same_bits(out.elements(), old)) << "tanh_backward n " << n;
    for (bool join : {false, true}) {  // relu_backward with a join's second gradient (af, rounded)
      Operand<T> second(afs, offset);
      const std::vector<T> seconds = second.elements();
      run_spans(ReluBackwardSpanBody<T>{a.data(), b.data(), out.data(), join ? second.data() : nullptr, n, aligned});
      run_all(n, ReluBackwardBody{ptr(as), ptr(bs), ptr(old), join ? ptr(seconds) : FloatPtr{}});
      EXPECT_TRUE(same_bits(out.elements(), old)) << "relu_backward n " << n << " join " << join;
    }
    std::vector<T> joined = bs;
    run_spans(AddBody<T, T, T>{b.data(), a.data(), b.data(), n, aligned});
    run_all(n, AccumulateBody{ptr(as), ptr(joined)});
    EXPECT_TRUE(same_bits(b.elements(), joined)) << "residual_add n " << n;
  });
}

// Row lengths that are and are not a multiple of the span (the host's `aligned` then false).
TEST(CudaSpans, BiasAddIsTheScalarBodyBitForBit) {
  for (int64_t C : {8, 24, 29, 1024})
    for (int64_t rows : {1, 3, 141})
      for (int64_t offset : {0, 1})
        for_each_type([&](auto tag) {
          using T = decltype(tag);
          const int64_t n = rows * C;
          auto check = [&](auto bias_tag) {
            using B = decltype(bias_tag);
            using Body = BiasAddSpanBody<T, B>;
            Operand<T> y(random_normal(n, 27), offset);
            Operand<B> bias(random_normal(C, 28), offset);
            std::vector<T> old = y.elements();
            const std::vector<B> bs = bias.elements();
            run_all(n, BiasAddBody{ptr(old), ptr(bs), C});
            const bool aligned = packs_aligned(y.data(), bias.data()) && C % Body::W == 0;
            run_spans(Body{y.data(), bias.data(), C, n, aligned});
            EXPECT_TRUE(same_bits(y.elements(), old)) << "C " << C << " rows " << rows << " offset " << offset;
          };
          check(tag);
          check(float{});
        });
}

}  // namespace
}  // namespace kiln
