// backend/cpu/matmul.cc — gemm and strided batched gemm on oneDNN matmul primitives, cached by
// shape per thread. bf16 mode packs the operands into per-thread bf16 scratch first.
#include <atomic>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cpu/key_hash.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

std::atomic<DType> g_matmul_dtype{DType::f32};

// The shape of one matmul call; also the cache key. Strides are in elements.
struct MatmulKey {
  int64_t batch, M, N, K;
  int64_t a_strides[3], b_strides[3], c_strides[3];
  float alpha, beta;
  int64_t dtype;  // DType; int64_t so the struct has no padding bytes
};

static_assert(sizeof(MatmulKey) == 15 * 8, "MatmulKey must have no padding");

struct MatmulEntry {
  dnnl::matmul prim;
  dnnl::memory a, b, c;
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory::desc strided_md(const MatmulKey& k, const int64_t* strides, int64_t rows,
                              int64_t cols, dnnl::memory::data_type dt) {
  if (k.batch == 1) return dnnl::memory::desc({rows, cols}, dt, {strides[1], strides[2]});
  return dnnl::memory::desc({k.batch, rows, cols}, dt, {strides[0], strides[1], strides[2]});
}

MatmulEntry& cached_matmul(const MatmulKey& k) {
  thread_local std::unordered_map<MatmulKey, MatmulEntry, KeyBytesHash<MatmulKey>, KeyBytesEqual<MatmulKey>> cache;
  auto it = cache.find(k);
  if (it != cache.end()) return it->second;

  using dt = dnnl::memory::data_type;
  const dt in_type = k.dtype == int64_t(DType::bf16) ? dt::bf16 : dt::f32;
  const auto a_md = strided_md(k, k.a_strides, k.M, k.K, in_type);
  const auto b_md = strided_md(k, k.b_strides, k.K, k.N, in_type);
  const auto c_md = strided_md(k, k.c_strides, k.M, k.N, dt::f32);
  dnnl::primitive_attr attr;
  if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(k.beta);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc(a_md, b_md, c_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  MatmulEntry e{dnnl::matmul(pd), dnnl::memory(a_md, cpu_engine(), DNNL_MEMORY_NONE),
                dnnl::memory(b_md, cpu_engine(), DNNL_MEMORY_NONE),
                dnnl::memory(c_md, cpu_engine(), DNNL_MEMORY_NONE)};
  return cache.emplace(k, std::move(e)).first->second;
}

// Copies `batch` matrices of (rows, cols) with leading dimension ld and batch stride `stride`
// into dense bf16 (batch, rows, cols).
void pack_bf16(const float* src, int64_t batch, int64_t stride, int64_t rows, int64_t cols,
               int64_t ld, uint16_t* dst) {
#pragma omp parallel for collapse(2) schedule(static) if (batch * rows * cols > 16384)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r) {
      const float* s = src + b * stride + r * ld;
      uint16_t* d = dst + (b * rows + r) * cols;
      for (int64_t c = 0; c < cols; ++c) d[c] = f32_to_bf16(s[c]);
    }
}

void run_matmul(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, int64_t stride_a, const float* B, int64_t ldb,
                int64_t stride_b, float beta, float* C, int64_t ldc, int64_t stride_c,
                int64_t batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  if (K == 0) {  // no products: C = beta * C
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          float& c = C[b * stride_c + m * ldc + n];
          c = beta == 0.0f ? 0.0f : beta * c;
        }
    return;
  }
  const DType dtype = g_matmul_dtype.load(std::memory_order_relaxed);
  MatmulKey k;
  k.batch = batch;
  k.M = M;
  k.N = N;
  k.K = K;
  k.alpha = alpha;
  k.beta = beta;
  k.dtype = int64_t(dtype);
  const void* a_data = A;
  const void* b_data = B;
  if (dtype == DType::bf16) {
    // Dense packed copies in the stored orientation; strides follow the packed layout.
    thread_local std::vector<uint16_t> a16, b16;
    const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    if (a16.size() < size_t(batch * M * K)) a16.resize(size_t(batch * M * K));
    if (b16.size() < size_t(batch * K * N)) b16.resize(size_t(batch * K * N));
    pack_bf16(A, batch, stride_a, a_rows, a_cols, lda, a16.data());
    pack_bf16(B, batch, stride_b, b_rows, b_cols, ldb, b16.data());
    lda = a_cols;
    ldb = b_cols;
    stride_a = M * K;
    stride_b = K * N;
    a_data = a16.data();
    b_data = b16.data();
  }
  // op(A) (M, K): element (m, k) sits at m*lda + k, or k*lda + m when transposed.
  k.a_strides[0] = stride_a;
  k.a_strides[1] = trans_a ? 1 : lda;
  k.a_strides[2] = trans_a ? lda : 1;
  k.b_strides[0] = stride_b;
  k.b_strides[1] = trans_b ? 1 : ldb;
  k.b_strides[2] = trans_b ? ldb : 1;
  k.c_strides[0] = stride_c;
  k.c_strides[1] = ldc;
  k.c_strides[2] = 1;

  MatmulEntry& e = cached_matmul(k);
  e.a.set_data_handle(const_cast<void*>(a_data));
  e.b.set_data_handle(const_cast<void*>(b_data));
  e.c.set_data_handle(C);
  thread_local dnnl::stream stream(cpu_engine());
  e.prim.execute(stream, {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
  stream.wait();
}

}  // namespace

void set_matmul_dtype(DType dtype) {
  KILN_CHECK(dtype == DType::f32 || dtype == DType::bf16,
             "matmul dtype must be f32 or bf16, got {}", dtype_name(dtype));
  g_matmul_dtype.store(dtype);
}

DType matmul_dtype() { return g_matmul_dtype.load(); }

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc) {
  run_matmul(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

void gemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, int64_t stride_a, const float* B, int64_t ldb,
                  int64_t stride_b, float beta, float* C, int64_t ldc, int64_t stride_c,
                  int64_t batch) {
  run_matmul(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
             stride_c, batch);
}

}  // namespace kiln::ops
