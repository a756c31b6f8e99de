// The CUDA backend's activation, row and column bodies (elementwise_bodies.h, rows_bodies.h,
// layernorm_bodies.h) run on the CPU over the launch's grid, against float64 references; the
// column sums, gathers and scatter-adds against the CPU backend bit for bit (they add in the same
// order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/layernorm_bodies.h"
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

TEST(CudaBodies, ActivationsAndResidualJoinsMatchFloat64) {
  const int64_t C = 29, n = C * 141;  // (141, 29) rows for the bias
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> x = stored<T>(random_normal(n, 11, 2.0f));
    const std::vector<T> g = stored<T>(random_normal(n, 12));
    const std::vector<float> bias = random_normal(C, 13);
    std::vector<T> th(x.size()), dth(x.size()), r(x.size()), dr(x.size()), dsum(x.size());
    std::vector<T> acc = g, biased = g;
    run_all(n, TanhForwardBody{ptr(x), ptr(th)});
    run_all(n, TanhBackwardBody{ptr(th), ptr(g), ptr(dth)});
    run_all(n, ReluForwardBody{ptr(x), ptr(r)});
    run_all(n, ReluBackwardBody{ptr(r), ptr(g), ptr(dr), {}});
    run_all(n, ReluBackwardBody{ptr(r), ptr(g), ptr(dsum), ptr(x)});  // a join's two gradient parts
    run_all(n, AccumulateBody{ptr(x), ptr(acc)});
    run_all(n, BiasAddBody{ptr(biased), ptr(bias), C});
    const std::vector<double> xd = values(x), gd = values(g), thd = values(th), rd = values(r);
    std::vector<double> w_th(xd.size()), w_dth(xd.size()), w_r(xd.size()), w_dr(xd.size()),
        w_dsum(xd.size()), w_acc(xd.size()), w_bias(xd.size());
    for (size_t i = 0; i < xd.size(); ++i) {
      w_th[i] = std::tanh(xd[i]);
      w_dth[i] = gd[i] * (1 - thd[i] * thd[i]);
      w_r[i] = std::max(xd[i], 0.0);
      w_dr[i] = rd[i] > 0 ? gd[i] : 0.0;
      w_dsum[i] = rd[i] > 0 ? gd[i] + xd[i] : 0.0;
      w_acc[i] = xd[i] + gd[i];
      w_bias[i] = gd[i] + bias[i % size_t(C)];
    }
    EXPECT_LE(max_rel_error(values(th), w_th), tolerance<T>());
    EXPECT_LE(max_rel_error(values(dth), w_dth), tolerance<T>());
    EXPECT_EQ(values(r), w_r);  // exact: max and a copy
    EXPECT_EQ(values(dr), w_dr);
    EXPECT_LE(max_rel_error(values(dsum), w_dsum), tolerance<T>());
    EXPECT_LE(max_rel_error(values(acc), w_acc), tolerance<T>());
    EXPECT_LE(max_rel_error(values(biased), w_bias), tolerance<T>());
  });
}

// The three launches of a softmax (rows_bodies.h): lanes, rows, elements.
template <typename T>
void softmax_by_lanes(const std::vector<T>& x, const int32_t* mask, int64_t per_batch, int64_t cols,
                      std::vector<T>& y) {
  const int64_t rows = int64_t(x.size()) / cols;
  std::vector<float> partial(size_t(rows * kRowLanes * 2)), stats(size_t(rows * 2));
  const SoftmaxScores scores{ptr(x), mask, per_batch, cols};
  run_all(rows * kRowLanes, SoftmaxLaneBody{scores, partial.data()});
  run_all(rows, SoftmaxRowStatsBody{partial.data(), stats.data()});
  run_all(rows * cols, SoftmaxApplyBody{scores, ptr(y), stats.data()});
}

// Rows shorter than the lanes (most lanes empty) and longer; a plain softmax and large scores.
TEST(CudaBodies, SoftmaxRowsMatchFloat64) {
  for (const int64_t cols : {7, 129}) {
    const int64_t rows = 37;
    for_each_type([&](auto tag) {
      using T = decltype(tag);
      const std::vector<T> x = stored<T>(random_normal(rows * cols, 5, 40.0f));
      std::vector<T> y(x.size());
      softmax_by_lanes(x, nullptr, 1, cols, y);
      const std::vector<double> xd = values(x);
      std::vector<double> want(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, xd[size_t(r * cols + c)]);
        for (int64_t c = 0; c < cols; ++c) sum += std::exp(xd[size_t(r * cols + c)] - mx);
        for (int64_t c = 0; c < cols; ++c) want[size_t(r * cols + c)] = std::exp(xd[size_t(r * cols + c)] - mx) / sum;
      }
      EXPECT_LE(max_rel_error(values(y), want), tolerance<T>()) << cols;
    });
  }
}

TEST(CudaBodies, SoftmaxBackwardAndMaskedAttentionSoftmaxMatchFloat64) {
  const int64_t B = 2, heads = 3, Sq = 5, Sk = 67, rows = B * heads * Sq;
  const std::vector<int32_t> mask = [&] {
    std::vector<int32_t> m(size_t(B * Sk), 1);
    for (int64_t k = 50; k < Sk; ++k) m[size_t(Sk + k)] = 0;  // batch 1 pads its tail
    return m;
  }();
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> s = stored<T>(random_normal(rows * Sk, 14, 3.0f));
    std::vector<T> p(s.size());
    softmax_by_lanes(s, mask.data(), heads * Sq, Sk, p);
    const std::vector<T> dy = stored<T>(random_normal(rows * Sk, 15));
    std::vector<T> dx(s.size());
    std::vector<double> partial(static_cast<size_t>(rows * kRowLanes)), dot(static_cast<size_t>(rows));
    run_all(rows * kRowLanes, SoftmaxBackwardLaneBody{ptr(p), ptr(dy), Sk, partial.data()});
    run_all(rows, LaneSumBody{partial.data(), dot.data()});
    run_all(rows * Sk, SoftmaxBackwardApplyBody{ptr(p), ptr(dy), ptr(dx), dot.data(), Sk, 0.5f});
    const std::vector<double> sd = values(s), pd = values(p), dyd = values(dy);
    std::vector<double> want_p(s.size()), want_dx(s.size());
    for (int64_t r = 0; r < rows; ++r) {
      const size_t o = size_t(r * Sk);
      const int32_t* m = mask.data() + (r / (heads * Sq)) * Sk;
      double mx = -INFINITY, sum = 0, dot = 0;
      for (int64_t k = 0; k < Sk; ++k) mx = std::max(mx, sd[o + k] + (m[k] ? 0 : -10000));
      for (int64_t k = 0; k < Sk; ++k) sum += std::exp(sd[o + k] + (m[k] ? 0 : -10000) - mx);
      for (int64_t k = 0; k < Sk; ++k)
        want_p[o + k] = std::exp(sd[o + k] + (m[k] ? 0 : -10000) - mx) / sum;
      for (int64_t k = 0; k < Sk; ++k) dot += pd[o + k] * dyd[o + k];
      for (int64_t k = 0; k < Sk; ++k) want_dx[o + k] = 0.5 * pd[o + k] * (dyd[o + k] - dot);
    }
    EXPECT_LE(max_rel_error(values(p), want_p), tolerance<T>());
    EXPECT_LE(max_rel_error(values(dx), want_dx), tolerance<T>());
  });
}

TEST(CudaBodies, LayerNormForwardMatchesFloat64) {
  const int64_t rows = 19, C = 257;
  const float eps = 1e-5f;
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> x = stored<T>(random_normal(rows * C, 6, 2.0f));
    const std::vector<T> w = stored<T>(random_normal(C, 7)), b = stored<T>(random_normal(C, 8));
    std::vector<T> y(x.size()), in_place = x;
    std::vector<float> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    std::vector<double> partial(size_t(2 * rows * kRowLanes));
    run_all(rows * kRowLanes, RowMomentsLaneBody{ptr(x), C, partial.data()});
    run_all(rows, LayerNormStatsBody{partial.data(), C, eps, mean.data(), rstd.data()});
    run_all(rows * C, LayerNormApplyBody{ptr(x), ptr(w), ptr(b), ptr(y), mean.data(), rstd.data(), C});
    run_all(rows * C, LayerNormApplyBody{ptr(in_place), ptr(w), ptr(b), ptr(in_place), mean.data(), rstd.data(), C});
    const std::vector<double> xd = values(x), wd = values(w), bd = values(b);
    std::vector<double> want(x.size()), want_mean(static_cast<size_t>(rows)), want_rstd(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) m += xd[size_t(r * C + c)] / double(C);
      for (int64_t c = 0; c < C; ++c) var += std::pow(xd[size_t(r * C + c)] - m, 2) / double(C);
      const double s = 1 / std::sqrt(var + eps);
      want_mean[size_t(r)] = m;
      want_rstd[size_t(r)] = s;
      for (int64_t c = 0; c < C; ++c)
        want[size_t(r * C + c)] = (xd[size_t(r * C + c)] - m) * s * wd[size_t(c)] + bd[size_t(c)];
    }
    EXPECT_LE(max_rel_error(values(y), want), tolerance<T>());
    EXPECT_EQ(values(in_place), values(y));  // y may alias x
    EXPECT_LE(max_rel_error(mean, want_mean), 1e-6);
    EXPECT_LE(max_rel_error(rstd, want_rstd), 1e-6);

    // The residual join in the moments' launch: a + residual (f32, then rounded to T) written to
    // sum (here over a), then the same moments as for the joined values themselves.
    const std::vector<T> residual = stored<T>(random_normal(rows * C, 9));
    std::vector<T> a = x;
    const std::vector<double> ad = values(a), rd = values(residual);
    std::vector<float> exact(x.size());
    for (size_t i = 0; i < exact.size(); ++i) exact[i] = float(ad[i] + rd[i]);
    const std::vector<T> joined = stored<T>(exact);
    std::vector<double> joined_partial(partial.size()), plain_partial(partial.size());
    run_all(rows * kRowLanes, RowMomentsLaneBody{ptr(a), C, joined_partial.data(), ptr(residual), ptr(a)});
    EXPECT_EQ(values(a), values(joined));
    run_all(rows * kRowLanes, RowMomentsLaneBody{ptr(joined), C, plain_partial.data()});
    EXPECT_EQ(joined_partial, plain_partial);
  });
}

TEST(CudaBodies, LayerNormBackwardMatchesFloat64AndTheCpuBackendsSums) {
  const int64_t N = 75, C = 259;  // parameter-gradient chunks of 32, 32 and 11 rows
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> x = stored<T>(random_normal(N * C, 16, 2.0f));
    const std::vector<T> dy = stored<T>(random_normal(N * C, 17));
    const std::vector<float> w = random_normal(C, 18);
    const std::vector<double> xd = values(x), dyd = values(dy);
    std::vector<float> mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) {
      double m = 0, v = 0;
      for (int64_t c = 0; c < C; ++c) m += xd[size_t(r * C + c)] / double(C);
      for (int64_t c = 0; c < C; ++c) v += std::pow(xd[size_t(r * C + c)] - m, 2) / double(C);
      mean[size_t(r)] = float(m);
      rstd[size_t(r)] = float(1 / std::sqrt(v + 1e-5));
    }
    std::vector<T> dx(x.size());
    std::vector<T> acc = stored<T>(random_normal(N * C, 19));
    const std::vector<double> acc0 = values(acc);
    std::vector<float> dw(size_t(C), 1.0f), db(size_t(C), -1.0f);
    // As layernorm.cc launches them: parameter gradients per (chunk, column), then per column;
    // the row sums per lane, then per row; then dx per element.
    const int64_t chunks = (N + ops::kLayerNormGradRows - 1) / ops::kLayerNormGradRows;
    std::vector<float> chunk_sums(size_t(2 * chunks * C));
    run_all(chunks * C, LayerNormParamChunkBody{ptr(x), ptr(dy), mean.data(), rstd.data(), N, C, chunk_sums.data()});
    run_all(C, LayerNormParamSumBody{chunk_sums.data(), chunks, C, dw.data(), db.data()});
    std::vector<double> partial(size_t(2 * N * kRowLanes));
    std::vector<float> means(size_t(2 * N));
    run_all(N * kRowLanes, LayerNormGradLaneBody{ptr(x), ptr(dy), ptr(w), mean.data(), rstd.data(), C, partial.data()});
    run_all(N, LayerNormGradStatsBody{partial.data(), C, means.data()});
    run_all(N * C, LayerNormGradApplyBody{ptr(x), ptr(dy), ptr(w), ptr(dx), mean.data(), rstd.data(), means.data(), C,
                                          false});
    run_all(N * C, LayerNormGradApplyBody{ptr(x), ptr(dy), ptr(w), ptr(acc), mean.data(), rstd.data(), means.data(),
                                          C, true});
    std::vector<double> want(x.size()), want_acc(x.size()), want_dw(size_t(C), 1.0),
        want_db(size_t(C), -1.0);
    for (int64_t r = 0; r < N; ++r) {
      double sg = 0, sgx = 0;
      for (int64_t c = 0; c < C; ++c) {
        const size_t i = size_t(r * C + c);
        const double xh = (xd[i] - mean[size_t(r)]) * rstd[size_t(r)], g = dyd[i] * w[size_t(c)];
        sg += g, sgx += g * xh;
        want_dw[size_t(c)] += dyd[i] * xh;
        want_db[size_t(c)] += dyd[i];
      }
      for (int64_t c = 0; c < C; ++c) {
        const size_t i = size_t(r * C + c);
        const double xh = (xd[i] - mean[size_t(r)]) * rstd[size_t(r)];
        want[i] = rstd[size_t(r)] * (dyd[i] * w[size_t(c)] - sg / double(C) - xh * sgx / double(C));
        want_acc[i] = acc0[i] + want[i];
      }
    }
    EXPECT_LE(max_rel_error(values(dx), want), tolerance<T>());
    EXPECT_LE(max_rel_error(values(acc), want_acc), tolerance<T>());
    EXPECT_LE(max_rel_error(dw, want_dw), 1e-5);
    EXPECT_LE(max_rel_error(db, want_db), 1e-5);
    // The parameter gradients are the CPU backend's sums in the same order (equal up to where
    // a compiler fuses a multiply-add).
    const DType dt = dtype_of<T>();
    Tensor cpu_dw = Tensor::empty({C}), cpu_db = Tensor::empty({C}), cpu_dx = Tensor::empty({N, C}, dt);
    ops::fill(cpu_context(), cpu_dw, 1.0f);
    ops::fill(cpu_context(), cpu_db, -1.0f);
    std::vector<float> w_f(w);
    ops::layernorm_backward(cpu_context(), Tensor::view(const_cast<T*>(dy.data()), {N, C}, dt),
                            Tensor::view(const_cast<T*>(x.data()), {N, C}, dt), Tensor::view(w_f.data(), {C}),
                            Tensor::view(mean.data(), {N}), Tensor::view(rstd.data(), {N}), cpu_dx, cpu_dw, cpu_db);
    const std::vector<float> cpu_dw_v(cpu_dw.ptr<float>(), cpu_dw.ptr<float>() + C);
    const std::vector<float> cpu_db_v(cpu_db.ptr<float>(), cpu_db.ptr<float>() + C);
    EXPECT_LE(max_rel_error(dw, std::vector<double>(cpu_dw_v.begin(), cpu_dw_v.end())), 1e-6);
    EXPECT_EQ(db, cpu_db_v);  // plain sums: bit for bit
  });
}

// scatter_add_rows's three launches (rows.cc) on the host, over `run_on`.
template <typename Runner>
void scatter_add(FloatPtr dy, const std::vector<int32_t>& ids, FloatPtr table, int64_t num, int64_t dim,
                 int64_t first, Runner run_on) {
  const int64_t n = int64_t(ids.size()), slices = (n + kRankSlice - 1) / kRankSlice;
  std::vector<int32_t> parts(static_cast<size_t>(slices * n)), order(ids.size()), sorted_rows(ids.size());
  run_on(slices * n, ScatterRankBody{ids.data(), n, num, first, parts.data()});
  run_on(n, ScatterPlaceBody{ids.data(), parts.data(), n, num, first, slices, order.data(), sorted_rows.data()});
  run_on(n * dim, ScatterRunBody{dy, table, order.data(), sorted_rows.data(), n, num, dim});
}
const auto kLaunchGrid = [](int64_t n, const auto& body) { run_all(n, body); };
const auto kNarrowGrid = [](int64_t n, const auto& body) { run_narrow(n, body); };

TEST(CudaBodies, ScatterAddSortsTheIdsStably) {
  // 1100 ids over three slices, rows with long runs (id 2: every third) and ids outside the part.
  const int64_t n = 1100, num = 40, first = 5;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = i % 3 == 0 ? 7 : int32_t((i * 13) % 50);
  const int64_t slices = (n + kRankSlice - 1) / kRankSlice;
  std::vector<int32_t> parts(static_cast<size_t>(slices * n)), order(ids.size()), sorted_rows(ids.size());
  run_all(slices * n, ScatterRankBody{ids.data(), n, num, first, parts.data()});
  run_all(n, ScatterPlaceBody{ids.data(), parts.data(), n, num, first, slices, order.data(), sorted_rows.data()});
  std::vector<int32_t> want(ids.size());
  for (int64_t i = 0; i < n; ++i) want[size_t(i)] = int32_t(i);
  const auto row = [&](int32_t i) {
    const int64_t r = int64_t(ids[size_t(i)]) - first;
    return r >= 0 && r < num ? r : num;
  };
  std::stable_sort(want.begin(), want.end(), [&](int32_t a, int32_t b) { return row(a) < row(b); });
  EXPECT_EQ(order, want);
  for (int64_t p = 0; p < n; ++p) EXPECT_EQ(sorted_rows[size_t(p)], row(want[size_t(p)])) << p;
}

TEST(CudaBodies, ScatterAddIsTheCpuBackendsOnAnyGrid) {
  // 1300 ids, a third of them one row (a long run over several batches of loads), into f32, bf16
  // and f16 tables, whole and a part.
  const int64_t n = 1300, dim = 40, num = 23;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = i % 3 == 0 ? 5 : int32_t((i * 7 + i / 13) % num);
  const Tensor id_t = Tensor::view(ids.data(), {n}, DType::i32);
  const std::vector<bf16_t> dy = stored<bf16_t>(random_normal(n * dim, 22));
  const Tensor dy_t = Tensor::view(const_cast<bf16_t*>(dy.data()), {n, dim}, DType::bf16);
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    for (const int64_t first : {int64_t(0), int64_t(4)}) {
      const int64_t held = num - first;
      const std::vector<T> start = stored<T>(random_normal(held * dim, 23));
      std::vector<T> got = start, narrow = start;
      scatter_add(ptr(dy), ids, ptr(got), held, dim, first, kLaunchGrid);
      scatter_add(ptr(dy), ids, ptr(narrow), held, dim, first, kNarrowGrid);
      Tensor want = Tensor::empty({held, dim}, dtype_of<T>());
      std::memcpy(want.data, start.data(), want.nbytes());
      ops::scatter_add_rows(cpu_context(), dy_t, id_t, want, first);
      const std::string what = std::string(dtype_name(dtype_of<T>())) + " from " + std::to_string(first);
      EXPECT_EQ(std::memcmp(got.data(), want.data, want.nbytes()), 0) << what;
      EXPECT_EQ(std::memcmp(narrow.data(), got.data(), want.nbytes()), 0) << what;
    }
  });
}

TEST(CudaBodies, BiasGradIsTheCpuBackendsOnAnyGrid) {
  // 1000 rows: 16 chunks, the last of 40 rows.
  const int64_t n = 1000, C = 33, chunks = (n + ops::kBiasGradRows - 1) / ops::kBiasGradRows;
  const std::vector<bf16_t> dy = stored<bf16_t>(random_normal(n * C, 24));
  std::vector<double> partial(static_cast<size_t>(chunks * C));
  std::vector<float> got(size_t(C), 0.25f), narrow = got;
  run_all(chunks * C, BiasGradChunkBody{ptr(dy), partial.data(), n, C});
  run_all(C, BiasGradCombineBody{partial.data(), got.data(), chunks, C});
  run_narrow(chunks * C, BiasGradChunkBody{ptr(dy), partial.data(), n, C});
  run_narrow(C, BiasGradCombineBody{partial.data(), narrow.data(), chunks, C});
  Tensor want = Tensor::empty({C}, DType::f32);
  ops::fill(cpu_context(), want, 0.25f);
  ops::bias_grad(cpu_context(), Tensor::view(const_cast<bf16_t*>(dy.data()), {n, C}, DType::bf16), want);
  EXPECT_EQ(std::memcmp(got.data(), want.data, want.nbytes()), 0);
  EXPECT_EQ(got, narrow);
  const std::vector<double> dyd = values(dy);
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0.25;
    for (int64_t r = 0; r < n; ++r) sum += dyd[size_t(r * C + c)];
    EXPECT_NEAR(got[size_t(c)], sum, 2e-5 * std::max(1.0, std::abs(sum))) << c;
  }
}

TEST(CudaBodies, BiasGradGatherAndScatterAddAreTheCpuBackendsBitForBit) {
  const int64_t n = 300, dim = 70, num = 11;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 7 + i / 13) % num);  // repeats
  const Tensor id_t = Tensor::view(ids.data(), {n}, DType::i32);
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const DType dt = dtype_of<T>();
    const std::vector<T> dy = stored<T>(random_normal(n * dim, 20));
    const Tensor dy_t = Tensor::view(const_cast<T*>(dy.data()), {n, dim}, dt);
    // bias_grad
    std::vector<float> db(size_t(dim), 0.25f);
    const int64_t chunks = (n + ops::kBiasGradRows - 1) / ops::kBiasGradRows;  // the last one partial
    std::vector<double> partial(static_cast<size_t>(chunks * dim));
    run_all(chunks * dim, BiasGradChunkBody{ptr(dy), partial.data(), n, dim});
    run_all(dim, BiasGradCombineBody{partial.data(), db.data(), chunks, dim});
    Tensor want_db = Tensor::empty({dim}, DType::f32);
    ops::fill(cpu_context(), want_db, 0.25f);
    ops::bias_grad(cpu_context(), dy_t, want_db);
    EXPECT_EQ(std::memcmp(db.data(), want_db.data, want_db.nbytes()), 0) << dtype_name(dt);
    // gather into f32 rows
    std::vector<float> rows(static_cast<size_t>(n * dim));
    const Tensor table = Tensor::view(const_cast<T*>(dy.data()), {n, dim}, dt);
    // (the whole table, then its rows [3, 8) as a vocab-parallel part holds them: the other ids
    // give zero rows)
    for (const int64_t first : {int64_t(0), int64_t(3)}) {
      const int64_t part_rows = first == 0 ? n : 5;
      const Tensor part = table.slice_rows(first, first + part_rows);
      const FloatPtr part_ptr{const_cast<T*>(dy.data()) + first * dim, dt};
      run_all(n * dim, GatherBody{part_ptr, ptr(rows), ids.data(), part_rows, dim, first});
      Tensor want_rows = Tensor::empty({n, dim});
      ops::gather_rows(cpu_context(), part, id_t, want_rows, first);
      EXPECT_EQ(std::memcmp(rows.data(), want_rows.data, want_rows.nbytes()), 0) << dtype_name(dt) << " from " << first;
    }
    // scatter-add into a table of the same dtype, whole and a part
    for (const int64_t first : {int64_t(0), int64_t(4)}) {
      const int64_t rows_held = num - first;
      std::vector<T> table_rows = stored<T>(random_normal(rows_held * dim, 21));
      Tensor want = Tensor::empty({rows_held, dim}, dt);
      std::memcpy(want.data, table_rows.data(), want.nbytes());
      scatter_add(ptr(dy), ids, ptr(table_rows), rows_held, dim, first, kLaunchGrid);
      ops::scatter_add_rows(cpu_context(), dy_t, id_t, want, first);
      EXPECT_EQ(std::memcmp(table_rows.data(), want.data, want.nbytes()), 0) << dtype_name(dt) << " from " << first;
    }
  });
}

}  // namespace
}  // namespace kiln
