// The CUDA backend's kernel bodies (backend/cuda/elementwise_bodies.h), run on the CPU over the same grid
// the launches use (backend/cuda/grid.h), against float64 references and, where the contract is
// bitwise (casts, dropout masks), against the CPU backend. Compiled by the host compiler in
// every build, with or without CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/grid.h"
#include "cuda_bodies.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::max_rel_error;
using testing::random_normal;

const int64_t kSizes[] = {1, 3, 255, 256, 257, 4099, 4096 * 256 + 5};

TEST(CudaBodies, GridCoversEveryItemOnce) {
  for (int64_t n : kSizes) {
    const Grid g = grid_of(n);
    EXPECT_LE(g.blocks, uint32_t(kBlocksPerMultiprocessor * kH200Multiprocessors));
    std::vector<int> hits(size_t(n), 0);
    run_on_host(g, n, [&](int64_t i) { ++hits[size_t(i)]; });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)], 1) << "item " << i << " of " << n;
  }
}

TEST(CudaBodies, CastAndFillRoundLikeTheCpuBackend) {
  const int64_t n = 4099;
  std::vector<float> v = random_normal(n, 1, 100.0f);
  v[0] = NAN;
  v[1] = INFINITY;
  v[2] = 1e-7f;  // an f16 subnormal
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    std::vector<T> got(static_cast<size_t>(n));
    run_spans(CastBody<float, T>{v.data(), got.data(), n, packs_aligned(v.data(), got.data())});
    Tensor src = Tensor::view(v.data(), {n});
    Tensor want = Tensor::empty({n}, sizeof(T) == 4 ? DType::f32
                                     : std::is_same_v<T, bf16_t> ? DType::bf16 : DType::f16);
    ops::cast(cpu_context(), src, want);
    EXPECT_EQ(std::memcmp(got.data(), want.data, want.nbytes()), 0) << dtype_name(want.dtype);
    run_on_host(grid_of(n), n, FillBody<T>{got.data(), store<T>(0.5f)});
    for (const T& x : got) ASSERT_EQ(load(x), 0.5f);
  });
}

TEST(CudaBodies, AddAndScaleMatchFloat64InMixedDtypes) {
  const int64_t n = 4099;
  const std::vector<float> a = random_normal(n, 9), b = random_normal(n, 10);
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> bs = stored<T>(b);
    std::vector<T> out(static_cast<size_t>(n)), scaled(static_cast<size_t>(n));
    run_spans(AddBody<float, T, T>{a.data(), bs.data(), out.data(), n, true});
    run_spans(ScaleBody<T, T>{out.data(), scaled.data(), n, true, Scaled{0.5f}});
    std::vector<double> want(static_cast<size_t>(n));
    for (size_t i = 0; i < want.size(); ++i) want[i] = double(a[i]) + load(bs[i]);
    EXPECT_LE(max_rel_error(values(out), want), tolerance<T>());
    for (double& w : want) w *= 0.5;
    EXPECT_LE(max_rel_error(values(scaled), want), tolerance<T>());
  });
}

TEST(CudaBodies, GeluForwardAndBackwardMatchFloat64) {
  const int64_t n = 4099;
  for (bool tanh_form : {false, true})
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = stored<T>(random_normal(n, 2, 3.0f));
      const std::vector<T> dy = stored<T>(random_normal(n, 3));
      std::vector<T> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
      run_spans(GeluForwardSpanBody<T, T>{x.data(), y.data(), n, true, Gelu{tanh_form}});
      run_spans(GeluBackwardBody<T, T, T>{x.data(), dy.data(), dx.data(), n, true, GeluGrad{tanh_form}});
      std::vector<double> want_y(static_cast<size_t>(n)), want_dx(static_cast<size_t>(n));
      for (size_t i = 0; i < size_t(n); ++i) {
        const double v = load(x[i]), g = load(dy[i]);
        double cdf, dcdf;  // gelu = v cdf(v); gelu' = cdf + v cdf'
        if (tanh_form) {
          const double k = std::sqrt(2.0 / M_PI), t = std::tanh(k * (v + 0.044715 * v * v * v));
          cdf = 0.5 * (1 + t);
          dcdf = 0.5 * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
        } else {
          cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
          dcdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
        }
        want_y[i] = v * cdf;
        want_dx[i] = g * (cdf + v * dcdf);
      }
      EXPECT_LE(max_rel_error(values(y), want_y), tolerance<T>()) << tanh_form;
      EXPECT_LE(max_rel_error(values(dx), want_dx), tolerance<T>()) << tanh_form;
    });
}

// Also for a tensor-parallel rank's part of each sample (element offsets not on a block edge),
// and both paths of the body: whole packs (per and the offset multiples of 8) and elements.
TEST(CudaBodies, DropoutMaskIsTheCpuBackendsBitForBit) {
  const RngStream rng{42, rng_stream(RngPurpose::dropout, 3, 7)};
  const float p = 0.1f;
  int64_t offset = 1000;
  const Tensor offset_tensor = Tensor::view(&offset, {1}, DType::i64);
  const int64_t samples = 5;
  int packed_runs = 0;
  for (int64_t per : {4 * 37 + 3, 4 * 38})  // a partial Philox block per sample; whole packs
    for (int64_t element_offset : {0, 3, 8, 50, 151})
      for_each_type([&](auto tag) {
        using T = decltype(tag);
        using Body = DropoutBody<T, T>;
        const DType dt = dtype_of<T>();
        std::vector<T> xs = stored<T>(random_normal(samples * per, 4)), got(xs.size());
        const int64_t first = element_offset / 4, blocks = (element_offset + per + 3) / 4 - first;
        const int64_t groups = (blocks + Body::kBlocks - 1) / Body::kBlocks;
        const bool aligned = packs_aligned(xs.data(), got.data()) && per % Body::W == 0 &&
                             element_offset % Body::W == 0;
        const Body body{xs.data(), got.data(), rng,    &offset, per, element_offset, first,
                        blocks,    groups,     p,      1.0f / (1.0f - p),   aligned};
        run_all(samples * groups, body);
        packed_runs += aligned;
        Tensor in = Tensor::view(xs.data(), {samples, per}, dt);
        Tensor want = Tensor::empty({samples, per}, dt);
        ops::dropout_forward(cpu_context(), in, {p, rng, offset_tensor, samples, element_offset}, want);
        EXPECT_EQ(std::memcmp(got.data(), want.data, want.nbytes()), 0)
            << dtype_name(dt) << " per " << per << " offset " << element_offset << " packed " << aligned;
      });
  EXPECT_GT(packed_runs, 0);
}

}  // namespace
}  // namespace kiln
