// The ops whose reductions the op table documents as fixed-order (backend.h: row order, chunk
// order, "for any thread count") and the keyed random ops give bitwise the same results at 1 and
// 2 OpenMP threads; shapes are large enough that every op takes its parallel path.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <functional>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/philox.h"
#include "tests/backend/random_fill.h"

namespace kiln::ops {
namespace {

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

// Runs `op` (which returns the bytes of its outputs, computed from fresh inputs) at 1 and at 2
// threads; the bytes must be identical.
void expect_thread_count_independent(const char* name, const std::function<std::vector<std::byte>()>& op) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<std::byte> one = op();
  omp_set_num_threads(2);
  const std::vector<std::byte> two = op();
  omp_set_num_threads(saved);
  ASSERT_FALSE(one.empty()) << name;
  EXPECT_TRUE(one == two) << name << ": results differ between 1 and 2 threads";
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
    softmax_xent_backward(ctx, logits, lse, label_t, weights, 0.1f, 1.0f, 123.0, dlogits);
    return bytes_of({&lse, &totals, &dlogits});
  });
}

TEST(ThreadCount, DropoutMasksAreIndependentOfIt) {
  Context& ctx = cpu_context();
  const RngStream rng{77, rng_stream(RngPurpose::dropout, 3, 0)};
  expect_thread_count_independent("dropout forward + backward", [&] {
    const Tensor x = random_tensor({N, C}, 30);
    Tensor y = Tensor::empty({N, C}, DType::f32), dx = Tensor::empty({N, C}, DType::f32);
    dropout_forward(ctx, x, 0.1f, rng, 1000, 16, y);
    dropout_backward(ctx, x, 0.1f, rng, 1000, 16, dx);
    return bytes_of({&y, &dx});
  });
}

}  // namespace
}  // namespace kiln::ops
