// backend/cpu/matmul_primitive.h — what the CPU matmul caches per product shape: the key, the
// oneDNN primitive chosen for it with its operands' memory objects, and the helpers both
// primitive kinds (matmul, inner product) are built with. Internal to backend/cpu.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>

#include "kiln/backend/backend.h"

namespace kiln::ops::cpu {

// The shape of one matmul call; also the cache key. Strides are in elements, ordered
// (batch0, batch1, row, col) of op(A) (M, K), op(B) (K, N), C (M, N).
struct MatmulKey {
  int64_t M, N, K;
  int64_t batch[2];
  int64_t a_strides[4], b_strides[4], c_strides[4];
  int64_t ab_dtype, c_dtype, bias_dtype;  // DType; bias_dtype -1 without bias
  int64_t act;
  float alpha, beta;
  int64_t matmul_only;  // 1: the matmul primitive even where an inner product fits
};

static_assert(sizeof(MatmulKey) == 23 * 8, "MatmulKey must have no padding");

// A primitive and the memory objects its A, B, C (and bias) are passed through, with the
// argument each of them is to the primitive.
struct MatmulEntry {
  bool fallback = false;  // oneDNN could not build it: run the f32 product instead
  dnnl::primitive prim;
  dnnl::memory a, b, c, bias;
  int a_arg = DNNL_ARG_SRC, b_arg = DNNL_ARG_WEIGHTS, c_arg = DNNL_ARG_DST;
};

dnnl::engine& cpu_engine();
dnnl::memory::data_type dnnl_type(int64_t dtype);
inline bool batched(const MatmulKey& k) { return k.batch[0] != 1 || k.batch[1] != 1; }
// The product's activation and beta as oneDNN post-ops (alpha is set by the caller).
dnnl::post_ops matmul_post_ops(const MatmulKey& k);

// The product as one of oneDNN's inner-product primitives where one fits and runs optimised
// code (not oneDNN's reference implementation): unbatched, dense rows, alpha 1, beta 0 —
//   A B^T (+ bias, activation) -> forward        (y = x W^T: x (tokens, in), W (out, in))
//   A B                        -> backward-data  (dx = dy W)
//   A^T B, f32 C               -> backward-weights (dW = dy^T x)
// Their gemm kernels measured 4-15% faster than the matmul primitive's on these layouts
// (build/op_times), except an f32 forward with K > N. False: use the matmul primitive (always when
// k.matmul_only).
bool make_inner_product(const MatmulKey& k, MatmulEntry& e);

}  // namespace kiln::ops::cpu
