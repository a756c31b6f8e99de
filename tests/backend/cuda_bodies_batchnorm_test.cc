// The CUDA backend's batch-norm bodies (batchnorm_bodies.h) run on the CPU over the launches'
// grids, in the order batchnorm.cc launches them, against the CPU backend: statistics, the
// normalised output, the gradients and the running statistics.
#include <gtest/gtest.h>

#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/batchnorm_bodies.h"
#include "kiln/backend/cuda/grid.h"
#include "cuda_bodies.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using ops::bn_chunk_rows;
using namespace testing::cuda_bodies;
using testing::max_rel_error;
using testing::random_normal;

// channel_pass of batchnorm.cc on the host: runs, chunks, combine, each over `run_on`
// (run_all: the launches' grid, or run_narrow).
template <typename Runner>
std::vector<double> channel_pass(BnRunBody body, Runner run_on) {
  const BnCuts cuts = bn_cuts(body.rows);
  const int64_t width = bn_sums_per_channel(body.what) * body.C;
  std::vector<float> runs(static_cast<size_t>(cuts.runs() * width));
  std::vector<double> partial(static_cast<size_t>(cuts.chunks * width)), out(static_cast<size_t>(width));
  body.runs = runs.data();
  run_on(cuts.runs() * body.C, body);
  run_on(cuts.chunks * width, BnChunkBody{runs.data(), cuts, width, partial.data()});
  run_on(width, BnCombineBody{partial.data(), cuts.chunks, width, out.data()});
  return out;
}
std::vector<double> channel_pass(const BnRunBody& body) {
  return channel_pass(body, [](int64_t n, const auto& b) { run_all(n, b); });
}

std::vector<float> host(const Tensor& t) {
  return std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel());
}
Tensor filled(int64_t n, float value) {
  Tensor t = Tensor::empty({n});
  ops::fill(cpu_context(), t, value);
  return t;
}
template <typename T>
std::vector<double> tensor_values(const Tensor& t) {
  return values(std::vector<T>(t.ptr<T>(), t.ptr<T>() + t.numel()));
}

TEST(CudaBodies, BatchNormTrainingForwardAndBackwardMatchTheCpuBackend) {
  // 105 rows (two chunks of 64) and 20000 rows (chunks of 79) of a few channels.
  for (const int64_t rows : {int64_t(105), int64_t(20000)})
    for (const bool relu : {false, true})
      for_each_type([&](auto tag) {
        using T = decltype(tag);
        const DType dt = dtype_of<T>();
        const int64_t C = 5;
        const float eps = 1e-5f;
        std::vector<float> xv = random_normal(rows * C, 36, 2.0f);
        for (float& v : xv) v += 3.0f;
        const std::vector<T> x = stored<T>(xv), dy = stored<T>(random_normal(rows * C, 37));
        const std::vector<float> gamma = random_normal(C, 38), beta = random_normal(C, 39);
        // Forward, as batchnorm_train_forward launches it.
        const BnRunBody base{BnSum::x, ptr(x), {}, {}, nullptr, nullptr, rows, C, rows, false,
                                 nullptr};
        std::vector<float> shift(static_cast<size_t>(C));
        run_all(C, BnShiftBody{ptr(x), rows, C, shift.data()});
        BnRunBody shifted = base;
        shifted.what = BnSum::shifted, shifted.mean = shift.data();
        const std::vector<double> shifted_sums = channel_pass(shifted);
        std::vector<float> mean(static_cast<size_t>(C)), var(static_cast<size_t>(C)), coef(static_cast<size_t>(2 * C));
        run_all(C, BnShiftedStatsBody{shift.data(), shifted_sums.data(), rows, C, mean.data(), var.data()});
        run_all(C, BnForwardCoefBody{gamma.data(), beta.data(), mean.data(), var.data(), eps,
                                     coef.data(), coef.data() + C});
        std::vector<T> y(x.size());
        run_all(rows * C, BnNormalizeBody{ptr(x), ptr(y), {}, coef.data(), coef.data() + C, C, relu});
        // Backward.
        BnRunBody bw = base;
        bw.what = BnSum::backward, bw.y = ptr(y), bw.dy = ptr(dy), bw.mean = mean.data();
        bw.relu = relu;
        const std::vector<double> sums = channel_pass(bw);
        std::vector<float> dgamma(static_cast<size_t>(C), 0.5f), dbeta(static_cast<size_t>(C), -0.5f), k(static_cast<size_t>(3 * C));
        run_all(C, BnBackwardCoefBody{gamma.data(), var.data(), eps, true, sums.data(), sums.data(),
                                      C, rows, dgamma.data(), dbeta.data(), k.data()});
        std::vector<T> dx(x.size());
        run_all(rows * C,
                BnBackwardDxBody{ptr(x), ptr(y), ptr(dy), ptr(dx), mean.data(), k.data(), C, relu});

        const Tensor xt = Tensor::view(const_cast<T*>(x.data()), {rows, C}, dt);
        const Tensor dyt = Tensor::view(const_cast<T*>(dy.data()), {rows, C}, dt);
        const Tensor g = Tensor::view(const_cast<float*>(gamma.data()), {C});
        const Tensor b = Tensor::view(const_cast<float*>(beta.data()), {C});
        Tensor want_y = Tensor::empty({rows, C}, dt), want_mean = Tensor::empty({C});
        Tensor want_var = Tensor::empty({C}), want_dx = Tensor::empty({rows, C}, dt);
        Tensor want_dg = filled(C, 0.5f), want_db = filled(C, -0.5f);
        ops::batchnorm_train_forward(cpu_context(), xt, g, b, eps, relu, want_y, want_mean, want_var);
        ops::batchnorm_backward(cpu_context(), xt, want_y, dyt, g, want_mean, want_var, eps, relu,
                                true, want_dx, want_dg, want_db);
        const std::string what = std::to_string(rows) + " rows " + std::string(dtype_name(dt)) +
                                 (relu ? " relu" : "");
        EXPECT_EQ(mean, host(want_mean)) << what;  // the same sums in the same order
        EXPECT_LE(max_rel_error(var, host(want_var)), 1e-7) << what;
        const std::vector<double> yd = values(y), dxd = values(dx);
        EXPECT_LE(max_rel_error(yd, tensor_values<T>(want_y)), tolerance<T>()) << what;
        EXPECT_LE(max_rel_error(dxd, tensor_values<T>(want_dx)), tolerance<T>() * 4)
            << what;
        EXPECT_LE(max_rel_error(dgamma, host(want_dg)), 1e-5) << what;
        EXPECT_LE(max_rel_error(dbeta, host(want_db)), 1e-5) << what;

        // SyncBN's statistics: Σ x, then the squared deviations around the mean of every rank.
        const std::vector<double> sum = channel_pass(base);
        BnRunBody dev = base;
        dev.what = BnSum::deviations, dev.sum = sum.data();
        const std::vector<double> squares = channel_pass(dev);
        std::vector<float> sync_mean(static_cast<size_t>(C)), sync_var(static_cast<size_t>(C));
        run_all(C, BnStatsBody{sum.data(), squares.data(), rows, sync_mean.data(), sync_var.data()});
        Tensor want_sum = Tensor::empty({C}, DType::f64), want_squares = Tensor::empty({C}, DType::f64);
        ops::batchnorm_channel_sums(cpu_context(), xt, want_sum);
        ops::batchnorm_channel_deviations(cpu_context(), xt, want_sum, rows, want_squares);
        ops::batchnorm_stats_from_sums(cpu_context(), want_sum, want_squares, rows, want_mean, want_var);
        EXPECT_EQ(sync_mean, host(want_mean)) << what;
        EXPECT_EQ(sync_var, host(want_var)) << what;
        EXPECT_LE(max_rel_error(sync_var, var), 1e-6) << what;  // the one-read statistics agree

        // A residual block's join: the shortcut added before the ReLU, in the same pass.
        std::vector<T> joined(x.size());
        run_all(rows * C, BnNormalizeBody{ptr(x), ptr(joined), ptr(dy), coef.data(), coef.data() + C, C, relu});
        Tensor want_joined = Tensor::empty({rows, C}, dt);
        ops::batchnorm_train_forward(cpu_context(), xt, g, b, eps, relu, want_joined, want_mean, want_var, dyt);
        EXPECT_LE(max_rel_error(values(joined), tensor_values<T>(want_joined)), tolerance<T>()) << what;
        EXPECT_NE(values(joined), yd) << what;
      });
}

TEST(CudaBodies, BatchNormChannelSumsAreTheCpuBackendsOnAnyGrid) {
  // 20000 rows: chunks of 79 rows, two runs each (64 + 15); 70000: chunks of 274, five runs each
  // (the last of 18 rows), the last chunk shorter; 50: one run.
  for (const int64_t rows : {int64_t(50), int64_t(20000), int64_t(70000)}) {
    const int64_t C = 3;
    std::vector<float> xv = random_normal(rows * C, 44, 2.0f);
    for (float& v : xv) v += 1.5f;
    const std::vector<float> yv = random_normal(rows * C, 45), dyv = random_normal(rows * C, 46);
    const std::vector<bf16_t> x = stored<bf16_t>(xv), y = stored<bf16_t>(yv), dy = stored<bf16_t>(dyv);
    const std::vector<float> mean = {1.5f, 1.25f, 1.75f};
    BnRunBody sums{BnSum::x, ptr(x), {}, {}, nullptr, nullptr, rows, C, rows, false, nullptr};
    BnRunBody backward = sums;
    backward.what = BnSum::backward, backward.y = ptr(y), backward.dy = ptr(dy), backward.mean = mean.data();
    backward.relu = true;
    const Tensor xt = Tensor::view(const_cast<bf16_t*>(x.data()), {rows, C}, DType::bf16);
    const Tensor yt = Tensor::view(const_cast<bf16_t*>(y.data()), {rows, C}, DType::bf16);
    const Tensor dyt = Tensor::view(const_cast<bf16_t*>(dy.data()), {rows, C}, DType::bf16);
    Tensor want_sum = Tensor::empty({C}, DType::f64), want_backward = Tensor::empty({2, C}, DType::f64);
    ops::batchnorm_channel_sums(cpu_context(), xt, want_sum);
    ops::batchnorm_backward_sums(cpu_context(), xt, yt, dyt, Tensor::view(const_cast<float*>(mean.data()), {C}),
                                 true, want_backward);
    const auto narrow = [](int64_t n, const auto& b) { run_narrow(n, b); };
    for (const auto& [body, want] : {std::pair{sums, &want_sum}, std::pair{backward, &want_backward}}) {
      const std::vector<double> got = channel_pass(body);
      EXPECT_EQ(got, std::vector<double>(want->ptr<double>(), want->ptr<double>() + want->numel())) << rows;
      EXPECT_EQ(channel_pass(body, narrow), got) << rows;
    }
  }
}

TEST(CudaBodies, BatchNormRunningStatisticsAreTheHostFormula) {
  const int64_t C = 7, rows = 50;
  const std::vector<float> mean = random_normal(C, 40), var = random_normal(C, 41);
  std::vector<float> rm = random_normal(C, 42), rv = random_normal(C, 43), count = {3.0f};
  const float momentum = 0.1f, unbias = float(double(rows) / double(rows - 1));
  const std::vector<float> rm0 = rm, rv0 = rv;
  run_all(C, BnRunningBody{mean.data(), var.data(), momentum, unbias, rm.data(), rv.data(),
                           count.data()});
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_FLOAT_EQ(rm[size_t(c)], (1.0f - momentum) * rm0[size_t(c)] + momentum * mean[size_t(c)]);
    EXPECT_FLOAT_EQ(rv[size_t(c)], (1.0f - momentum) * rv0[size_t(c)] + momentum * var[size_t(c)] * unbias);
  }
  EXPECT_EQ(count[0], 4.0f);
}

}  // namespace
}  // namespace kiln
