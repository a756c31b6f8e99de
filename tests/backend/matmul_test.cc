#include <gtest/gtest.h>

#include <cstring>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "random_fill.h"

namespace kiln {
namespace {

using testing::max_rel_error;
using testing::random_normal;

struct GemmCase {
  int64_t M, N, K;
};

// Float64 reference for one (strided) matrix of C = alpha op(A) op(B) + beta C.
std::vector<double> gemm_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                                   const float* A, int64_t lda, const float* B, int64_t ldb,
                                   double beta, const float* C, int64_t ldc) {
  std::vector<double> out(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = ta ? A[k * lda + m] : A[m * lda + k];
        const double b = tb ? B[n * ldb + k] : B[k * ldb + n];
        acc += a * b;
      }
      out[size_t(m * N + n)] = alpha * acc + (beta != 0 ? beta * C[m * ldc + n] : 0.0);
    }
  return out;
}

// Runs every transpose combination with padded leading dimensions and checks against float64.
void check_gemm(DType dtype, double tol) {
  ops::set_matmul_dtype(dtype);
  const GemmCase cases[] = {{1, 1, 1}, {7, 13, 5}, {64, 48, 33}, {129, 65, 257}, {3, 200, 2}};
  uint32_t id = 0;
  for (const auto& c : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 1.0f, 0.5f}) {
          const float alpha = beta == 0.5f ? 0.25f : 1.0f;
          const int64_t lda = (ta ? c.M : c.K) + 3, ldb = (tb ? c.K : c.N) + 1, ldc = c.N + 2;
          const auto A = random_normal((ta ? c.K : c.M) * lda, ++id);
          const auto B = random_normal((tb ? c.N : c.K) * ldb, ++id);
          auto C = random_normal(c.M * ldc, ++id);
          const auto want = gemm_reference(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(),
                                           ldb, beta, C.data(), ldc);
          ops::gemm(ta, tb, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(),
                    ldc);
          std::vector<float> got(size_t(c.M * c.N));
          for (int64_t m = 0; m < c.M; ++m)
            for (int64_t n = 0; n < c.N; ++n) got[size_t(m * c.N + n)] = C[size_t(m * ldc + n)];
          EXPECT_LT(max_rel_error(got, want), tol)
              << "M=" << c.M << " N=" << c.N << " K=" << c.K << " ta=" << ta << " tb=" << tb
              << " beta=" << beta;
        }
  ops::set_matmul_dtype(DType::f32);
}

TEST(Gemm, F32MatchesFloat64Reference) { check_gemm(DType::f32, 1e-5); }

TEST(Gemm, Bf16MatchesFloat64ReferenceWithinBf16Precision) { check_gemm(DType::bf16, 1e-2); }

TEST(Gemm, Bf16IsLessExactThanF32) {
  // Proves the bf16 switch changes the computation (operands are really rounded).
  const int64_t M = 16, N = 16, K = 64;
  const auto A = random_normal(M * K, 1), B = random_normal(K * N, 2);
  std::vector<float> c32(M * N), c16(M * N);
  ops::gemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, c32.data(), N);
  ops::set_matmul_dtype(DType::bf16);
  EXPECT_EQ(ops::matmul_dtype(), DType::bf16);
  ops::gemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, c16.data(), N);
  ops::set_matmul_dtype(DType::f32);
  const double err = max_rel_error(c16, c32);
  EXPECT_GT(err, 1e-5);
  EXPECT_LT(err, 1e-2);
  EXPECT_THROW(ops::set_matmul_dtype(DType::f16), Error);
}

void check_batched(DType dtype, double tol) {
  ops::set_matmul_dtype(dtype);
  const int64_t batch = 5, M = 9, N = 17, K = 12;
  uint32_t id = 100;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
      // Batch strides larger than one matrix: gaps between matrices must be left alone.
      const int64_t sa = M * K + 7, sb = K * N + 3, sc = M * N + 5;
      const auto A = random_normal(batch * sa, ++id), B = random_normal(batch * sb, ++id);
      auto C = random_normal(batch * sc, ++id);
      const auto C0 = C;
      ops::gemm_batched(ta, tb, M, N, K, 0.5f, A.data(), lda, sa, B.data(), ldb, sb, 1.0f,
                        C.data(), ldc, sc, batch);
      for (int64_t b = 0; b < batch; ++b) {
        const auto want = gemm_reference(ta, tb, M, N, K, 0.5, A.data() + b * sa, lda,
                                         B.data() + b * sb, ldb, 1.0, C0.data() + b * sc, ldc);
        std::vector<float> got(C.begin() + b * sc, C.begin() + b * sc + M * N);
        EXPECT_LT(max_rel_error(got, want), tol) << "batch " << b << " ta=" << ta << " tb=" << tb;
        for (int64_t g = M * N; g < sc; ++g) EXPECT_EQ(C[b * sc + g], C0[b * sc + g]);
      }
    }
  ops::set_matmul_dtype(DType::f32);
}

TEST(GemmBatched, F32MatchesFloat64Reference) { check_batched(DType::f32, 1e-5); }
TEST(GemmBatched, Bf16MatchesFloat64ReferenceWithinBf16Precision) {
  check_batched(DType::bf16, 1e-2);
}

TEST(Gemm, RepeatedCallsAreBitwiseIdentical) {
  const int64_t M = 200, N = 300, K = 400;
  const auto A = random_normal(M * K, 7), B = random_normal(K * N, 8);
  std::vector<float> c1(M * N), c2(M * N);
  ops::gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, c1.data(), N);
  ops::gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, c2.data(), N);
  EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace kiln
