// backend/cpu/inner_product.cc — linear-layer products on oneDNN's inner-product primitives
// (matmul_primitive.h says which and why).
#include <string_view>
#include <utility>

#include "kiln/backend/cpu/matmul_primitive.h"

namespace kiln::ops::cpu {
namespace {

using md = dnnl::memory::desc;

// A (rows, cols) matrix with unit column stride and row stride `ld`.
md rows_md(int64_t rows, int64_t cols, int64_t ld, int64_t dtype) { return md({rows, cols}, dnnl_type(dtype), {ld, 1}); }

// False for oneDNN's reference implementations (correct but slow; padded rows get them).
bool optimised(const dnnl::primitive_desc_base& pd) { return !std::string_view(pd.impl_info_str()).starts_with("ref"); }

// One operand: the primitive's argument it is, and its descriptor.
struct Operand {
  int arg;
  md desc;
};

// e runs `prim` with A, B, C passed as these arguments through memory objects of these descriptors.
void bind(MatmulEntry& e, dnnl::primitive prim, const Operand& a, const Operand& b, const Operand& c) {
  e.prim = std::move(prim);
  e.a = dnnl::memory(a.desc, cpu_engine(), DNNL_MEMORY_NONE);
  e.b = dnnl::memory(b.desc, cpu_engine(), DNNL_MEMORY_NONE);
  e.c = dnnl::memory(c.desc, cpu_engine(), DNNL_MEMORY_NONE);
  e.a_arg = a.arg;
  e.b_arg = b.arg;
  e.c_arg = c.arg;
}

dnnl::inner_product_forward::primitive_desc forward_pd(const md& src, const md& weights, const md& bias, const md& dst,
                                                       const dnnl::primitive_attr& attr = {}) {
  const auto prop = dnnl::prop_kind::forward_training;
  return bias.is_zero() ? dnnl::inner_product_forward::primitive_desc({prop, src, weights, dst}, attr, cpu_engine())
                        : dnnl::inner_product_forward::primitive_desc({prop, src, weights, bias, dst}, attr, cpu_engine());
}

// y (M, N) = x (M, K) W^T (+ bias, activation), W stored (N, K).
bool make_forward(const MatmulKey& k, MatmulEntry& e) {
  const md src = rows_md(k.M, k.K, k.a_strides[2], k.ab_dtype), weights = rows_md(k.N, k.K, k.b_strides[3], k.ab_dtype);
  const md dst = rows_md(k.M, k.N, k.c_strides[2], k.c_dtype);
  const md bias = k.bias_dtype >= 0 ? md({k.N}, dnnl_type(k.bias_dtype), dnnl::memory::format_tag::a) : md();
  dnnl::primitive_attr attr;
  attr.set_post_ops(matmul_post_ops(k));
  const auto pd = forward_pd(src, weights, bias, dst, attr);
  if (!optimised(pd)) return false;
  bind(e, dnnl::inner_product_forward(pd), {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst});
  if (k.bias_dtype >= 0) e.bias = dnnl::memory(bias, cpu_engine(), DNNL_MEMORY_NONE);
  return true;
}

// dx (M, N) = dy (M, K) W, W stored (K, N): backward-data with OC = K, IC = N.
bool make_backward_data(const MatmulKey& k, MatmulEntry& e) {
  const md diff_dst = rows_md(k.M, k.K, k.a_strides[2], k.ab_dtype), weights = rows_md(k.K, k.N, k.b_strides[2], k.ab_dtype);
  const md diff_src = rows_md(k.M, k.N, k.c_strides[2], k.c_dtype);
  const dnnl::inner_product_backward_data::primitive_desc pd({diff_src, weights, diff_dst}, cpu_engine(),
                                                             forward_pd(diff_src, weights, md(), diff_dst));
  if (!optimised(pd)) return false;
  bind(e, dnnl::inner_product_backward_data(pd), {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, weights},
       {DNNL_ARG_DIFF_SRC, diff_src});
  return true;
}

// dW (M, N) f32 = dy^T x, dy stored (K, M), x (K, N): backward-weights with MB = K, OC = M, IC = N.
bool make_backward_weights(const MatmulKey& k, MatmulEntry& e) {
  const md diff_dst = rows_md(k.K, k.M, k.a_strides[3], k.ab_dtype), src = rows_md(k.K, k.N, k.b_strides[2], k.ab_dtype);
  const md diff_weights = rows_md(k.M, k.N, k.c_strides[2], k.c_dtype);
  const md any_weights({k.M, k.N}, dnnl_type(k.ab_dtype), dnnl::memory::format_tag::any);
  const dnnl::inner_product_backward_weights::primitive_desc pd({src, diff_weights, diff_dst}, cpu_engine(),
                                                                forward_pd(src, any_weights, md(), diff_dst));
  if (!optimised(pd)) return false;
  bind(e, dnnl::inner_product_backward_weights(pd), {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_SRC, src},
       {DNNL_ARG_DIFF_WEIGHTS, diff_weights});
  return true;
}

// oneDNN 2.6's f32 inner-product forward (sgemm) falls behind its matmul primitive where the
// reduction is longer than the output row (build/op_times, AVX-512, 2 threads): ResNet's classifier
// (16 x 2048 -> 1000) 2.0 vs 0.31 ms, BERT's FC2 (1024 x 3072 -> 768) 18.3 vs 13.7 ms; where it is
// shorter the inner product leads (1024 x 768 -> 3072: 14.2 vs 15.3 ms). bf16 does not show it.
bool slow_f32_forward(const MatmulKey& k) { return DType(k.ab_dtype) == DType::f32 && k.K > k.N; }

}  // namespace

bool make_inner_product(const MatmulKey& k, MatmulEntry& e) {
  if (k.matmul_only || batched(k) || k.alpha != 1.0f || k.beta != 0.0f || k.c_strides[3] != 1) return false;
  const bool a_rows = k.a_strides[3] == 1, a_cols = k.a_strides[2] == 1;  // A stored (M, K) / (K, M)
  const bool b_rows = k.b_strides[3] == 1, b_cols = k.b_strides[2] == 1;  // B stored (K, N) / (N, K)
  const bool plain = k.bias_dtype < 0 && k.act == int64_t(Activation::none);
  try {
    if (a_rows && b_cols) return !slow_f32_forward(k) && make_forward(k, e);
    if (a_rows && b_rows && plain) return make_backward_data(k, e);
    if (a_cols && b_rows && plain && DType(k.c_dtype) == DType::f32) return make_backward_weights(k, e);
  } catch (const dnnl::error&) {  // no such primitive for these dtypes or strides
  }
  return false;
}

}  // namespace kiln::ops::cpu
