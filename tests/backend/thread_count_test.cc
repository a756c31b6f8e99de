// The ops whose reductions the op table documents as fixed-order (backend.h: row order, chunk
// order, "for any thread count") and the keyed random ops give bitwise the same results at 1 and
// 2 OpenMP threads; shapes are large enough that every op takes its parallel path. The
// multi-tensor optimizer ops and norms are checked in tests/optim (fused_update_test,
// grad_norm_test) and parity_optim_test; initialisation in tests/models.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/philox.h"
#include "tests/backend/random_fill.h"
#include "tests/testing/thread_count.h"

namespace kiln::ops {
namespace {

using kiln::testing::expect_thread_count_independent;

Tensor from(const std::vector<float>& v, Shape shape) {
  Tensor t = Tensor::empty(shape, DType::f32);
  std::memcpy(t.data, v.data(), v.size() * sizeof(float));
  return t;
}

Tensor random_tensor(Shape shape, uint32_t id, float scale = 1.0f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return from(testing::random_normal(n, id, scale), shape);
}

std::vector<std::byte> bytes_of(std::initializer_list<const Tensor*> tensors) {
  std::vector<std::byte> out;
  for (const Tensor* t : tensors) {
    const auto* p = static_cast<const std::byte*>(t->data);
    out.insert(out.end(), p, p + t->numel() * int64_t(dtype_size(t->dtype)));
  }
  return out;
}

constexpr int64_t N = 512, C = 384;

TEST(ThreadCount, ColumnAndRowReductionsAreIndependentOfIt) {
  Context& ctx = cpu_context();
  expect_thread_count_independent("bias_grad", [&] {
    Tensor db = random_tensor({C}, 2);
    bias_grad(ctx, random_tensor({N, C}, 1), db);
    return bytes_of({&db});
  });
  expect_thread_count_independent("scatter_add_rows", [&] {
    std::vector<int32_t> ids(N);
    for (int64_t i = 0; i < N; ++i) ids[size_t(i)] = int32_t((i * 7) % 13);  // many rows per id
    Tensor id_t = Tensor::view(ids.data(), {N}, DType::i32, Device{});
    Tensor table = random_tensor({13, C}, 3);
    scatter_add_rows(ctx, random_tensor({N, C}, 4), id_t, table);
    return bytes_of({&table});
  });
  expect_thread_count_independent("layernorm_backward", [&] {
    const Tensor x = random_tensor({N, C}, 5), w = random_tensor({C}, 6), b = random_tensor({C}, 7);
    Tensor y = Tensor::empty({N, C}, DType::f32), mean = Tensor::empty({N}, DType::f32),
           rstd = Tensor::empty({N}, DType::f32), dx = Tensor::empty({N, C}, DType::f32);
    Tensor dw = random_tensor({C}, 8), db = random_tensor({C}, 9);
    layernorm_forward(ctx, x, w, b, 1e-12f, y, mean, rstd);
    layernorm_backward(ctx, random_tensor({N, C}, 10), x, w, mean, rstd, dx, dw, db);
    return bytes_of({&y, &mean, &rstd, &dx, &dw, &db});
  });
  expect_thread_count_independent("batchnorm train forward + backward", [&] {
    const Tensor x = random_tensor({N, C}, 11), gamma = random_tensor({C}, 12), beta = random_tensor({C}, 13);
    Tensor y = Tensor::empty({N, C}, DType::f32), mean = Tensor::empty({C}, DType::f32),
           var = Tensor::empty({C}, DType::f32), dx = Tensor::empty({N, C}, DType::f32);
    Tensor dgamma = random_tensor({C}, 14), dbeta = random_tensor({C}, 15);
    batchnorm_train_forward(ctx, x, gamma, beta, 1e-5f, true, y, mean, var);
    batchnorm_backward(ctx, x, y, random_tensor({N, C}, 16), gamma, mean, var, 1e-5f, true, true, dx, dgamma,
                       dbeta);
    return bytes_of({&y, &mean, &var, &dx, &dgamma, &dbeta});
  });
}

// SyncBN's split steps: channel sums and deviations in double combined in a fixed order.
TEST(ThreadCount, SyncBatchNormSumsAreIndependentOfIt) {
  Context& ctx = cpu_context();
  expect_thread_count_independent("batchnorm sync forward + backward", [&] {
    const Tensor x = random_tensor({N, C}, 40, 2.0f), gamma = random_tensor({C}, 41), beta = random_tensor({C}, 42);
    Tensor sum = Tensor::zeros({C}, DType::f64), squares = Tensor::zeros({C}, DType::f64);
    Tensor mean = Tensor::empty({C}, DType::f32), var = Tensor::empty({C}, DType::f32);
    Tensor y = Tensor::empty({N, C}, DType::f32), dx = Tensor::empty({N, C}, DType::f32);
    Tensor sums = Tensor::zeros({2 * C}, DType::f64);
    Tensor dgamma = random_tensor({C}, 43), dbeta = random_tensor({C}, 44);
    const Tensor dy = random_tensor({N, C}, 45);
    ops::batchnorm_channel_sums(ctx, x, sum);
    ops::batchnorm_channel_deviations(ctx, x, sum, N, squares);
    ops::batchnorm_stats_from_sums(ctx, sum, squares, N, mean, var);
    ops::batchnorm_eval_forward(ctx, x, gamma, beta, mean, var, 1e-5f, true, y);
    ops::batchnorm_backward_sums(ctx, x, y, dy, mean, true, sums);
    ops::batchnorm_backward_from_sums(ctx, x, y, dy, gamma, mean, var, 1e-5f, true, sums, sums, N, dx, dgamma,
                                      dbeta);
    return bytes_of({&sum, &squares, &mean, &var, &y, &sums, &dx, &dgamma, &dbeta});
  });
}

// Pooling sums (global average pool forward, max-pool gradient routing) and the row-parallel
// softmaxes: each output element is one fixed-order sum.
TEST(ThreadCount, PoolingAndSoftmaxAreIndependentOfIt) {
  Context& ctx = cpu_context();
  expect_thread_count_independent("global_avgpool forward + backward", [&] {
    const Tensor x = random_tensor({8, 7, 7, C}, 50);
    Tensor y = Tensor::empty({8, C}, DType::f32), dx = Tensor::empty({8, 7, 7, C}, DType::f32);
    global_avgpool_forward(ctx, x, y);
    global_avgpool_backward(ctx, random_tensor({8, C}, 51), dx);
    return bytes_of({&y, &dx});
  });
  expect_thread_count_independent("maxpool forward + backward", [&] {
    PoolShape s;
    s.N = 4, s.H = 16, s.W = 16, s.C = 64, s.R = 3, s.S = 3, s.stride_h = 2, s.stride_w = 2, s.pad_h = 1, s.pad_w = 1;
    const Tensor x = random_tensor({s.N, s.H, s.W, s.C}, 52);
    Tensor y = Tensor::empty({s.N, s.P(), s.Q(), s.C}, DType::f32), argmax = Tensor::empty(y.shape, DType::i32);
    Tensor dx = Tensor::empty(x.shape, DType::f32);
    maxpool_forward(ctx, s, x, y, argmax);
    maxpool_backward(ctx, s, random_tensor(y.shape, 53), argmax, dx);
    return bytes_of({&y, &argmax, &dx});
  });
  expect_thread_count_independent("softmax forward + backward", [&] {
    Tensor y = Tensor::empty({N, C}, DType::f32), dx = Tensor::empty({N, C}, DType::f32);
    softmax_forward(ctx, random_tensor({N, C}, 54, 3.0f), y);
    softmax_backward(ctx, y, random_tensor({N, C}, 55), 0.5f, dx);
    return bytes_of({&y, &dx});
  });
}

TEST(ThreadCount, CrossEntropyTotalsAndGradientsAreIndependentOfIt) {
  Context& ctx = cpu_context();
  expect_thread_count_independent("softmax_xent forward + backward", [&] {
    const Tensor logits = random_tensor({N, C}, 20, 3.0f);
    std::vector<int32_t> labels(N);
    for (int64_t i = 0; i < N; ++i) labels[size_t(i)] = i % 9 == 0 ? -1 : int32_t((i * 31) % C);
    const Tensor label_t = Tensor::view(labels.data(), {N}, DType::i32, Device{});
    const Tensor weights = random_tensor({N}, 21);
    Tensor lse = Tensor::empty({N}, DType::f32), totals = Tensor::empty({3}, DType::i64);
    Tensor dlogits = Tensor::empty({N, C}, DType::f32);
    softmax_xent_forward(ctx, logits, label_t, weights, 0.1f, lse, totals);
    softmax_xent_backward(ctx, logits, lse, label_t, weights, 0.1f, 1.0f, totals, {123.0, 0.0}, dlogits);
    return bytes_of({&lse, &totals, &dlogits});
  });
  expect_thread_count_independent("vocab-parallel xent partials + sumexp + backward", [&] {
    const Tensor logits = random_tensor({N, C}, 22, 3.0f);
    std::vector<int32_t> labels(N);
    for (int64_t i = 0; i < N; ++i) labels[size_t(i)] = i % 7 == 0 ? -1 : int32_t(100 + (i * 37) % (2 * C));
    const Tensor label_t = Tensor::view(labels.data(), {N}, DType::i32, Device{});
    Tensor partials = Tensor::empty({N, 3}, DType::f32), max = Tensor::empty({N}, DType::f32);
    Tensor sumexp = Tensor::empty({N}, DType::f64), lse = Tensor::empty({N}, DType::f32);
    Tensor dlogits = Tensor::empty({N, C}, DType::f32);
    vocab_xent_partials(ctx, logits, label_t, 100, partials);
    for (int64_t i = 0; i < N; ++i) max.ptr<float>()[i] = partials.ptr<float>()[3 * i];
    vocab_xent_sumexp(ctx, logits, max, sumexp);
    for (int64_t i = 0; i < N; ++i)
      lse.ptr<float>()[i] = max.ptr<float>()[i] + float(std::log(sumexp.ptr<double>()[i]));
    double sums[3] = {0.0, 321.0, 0.0};
    const Tensor totals = Tensor::view(sums, {3}, DType::i64);
    vocab_xent_backward(ctx, logits, lse, label_t, Tensor{}, 100, 1.0f, totals, {}, dlogits);
    return bytes_of({&partials, &sumexp, &dlogits});
  });
}

TEST(ThreadCount, DropoutMasksAreIndependentOfIt) {
  Context& ctx = cpu_context();
  const RngStream rng{77, rng_stream(RngPurpose::dropout, 3, 0)};
  expect_thread_count_independent("dropout forward + backward", [&] {
    const Tensor x = random_tensor({N, C}, 30);
    Tensor y = Tensor::empty({N, C}, DType::f32), dx = Tensor::empty({N, C}, DType::f32);
    int64_t first_sample = 1000;
    const Tensor offset = Tensor::view(&first_sample, {1}, DType::i64);
    dropout_forward(ctx, x, {0.1f, rng, offset, 16}, y);
    dropout_backward(ctx, x, {0.1f, rng, offset, 16}, dx);
    return bytes_of({&y, &dx});
  });
}

}  // namespace
}  // namespace kiln::ops
