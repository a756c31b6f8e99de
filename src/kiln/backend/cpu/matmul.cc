// backend/cpu/matmul.cc — typed (batched, strided) matmul on oneDNN matmul primitives, cached
// by shape per thread; bias and activation as oneDNN post-ops. A linear layer's products run
// on inner-product primitives where those fit (inner_product.cc). A bf16/f16 primitive that
// oneDNN cannot build on this CPU (no AVX-512 bf16 / fp16) is replaced by an f32 product of
// operands converted in scratch.
#include "kiln/backend/cpu/matmul.h"

#include <atomic>
#include <fmt/format.h>

#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/dnnl_exec.h"
#include "kiln/backend/cpu/key_hash.h"
#include "kiln/backend/cpu/matmul_primitive.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/matmul_check.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

std::atomic<bool> g_force_fallback{false};
std::atomic<bool> g_force_matmul{false};

dnnl::memory::desc strided_md(const MatmulKey& k, const int64_t* strides, int64_t rows,
                              int64_t cols, int64_t dtype) {
  if (!batched(k)) return dnnl::memory::desc({rows, cols}, dnnl_type(dtype), {strides[2], strides[3]});
  return dnnl::memory::desc({k.batch[0], k.batch[1], rows, cols}, dnnl_type(dtype),
                            {strides[0], strides[1], strides[2], strides[3]});
}

dnnl::algorithm eltwise_alg(Activation act) {
  switch (act) {
    case Activation::relu: return dnnl::algorithm::eltwise_relu;
    case Activation::gelu_erf: return dnnl::algorithm::eltwise_gelu_erf;
    case Activation::gelu_tanh: return dnnl::algorithm::eltwise_gelu_tanh;
    default: break;
  }
  throw Error("op matmul: no activation to fuse");
}

MatmulEntry& cached_matmul(const MatmulKey& k) {
  thread_local std::unordered_map<MatmulKey, MatmulEntry, KeyBytesHash<MatmulKey>,
                                  KeyBytesEqual<MatmulKey>>
      cache;
  auto it = cache.find(k);
  if (it != cache.end()) return it->second;
  if (MatmulEntry e; make_inner_product(k, e)) return cache.emplace(k, std::move(e)).first->second;

  const auto a_md = strided_md(k, k.a_strides, k.M, k.K, k.ab_dtype);
  const auto b_md = strided_md(k, k.b_strides, k.K, k.N, k.ab_dtype);
  const auto c_md = strided_md(k, k.c_strides, k.M, k.N, k.c_dtype);
  dnnl::memory::desc bias_md;
  if (k.bias_dtype >= 0)
    bias_md = batched(k) ? dnnl::memory::desc({1, 1, 1, k.N}, dnnl_type(k.bias_dtype),
                                              dnnl::memory::format_tag::abcd)
                         : dnnl::memory::desc({1, k.N}, dnnl_type(k.bias_dtype),
                                              dnnl::memory::format_tag::ab);
  dnnl::primitive_attr attr;
  if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
  attr.set_post_ops(matmul_post_ops(k));
  MatmulEntry e;
  try {
    const dnnl::matmul::desc desc = k.bias_dtype >= 0 ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                                      : dnnl::matmul::desc(a_md, b_md, c_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    e.prim = dnnl::matmul(pd);
  } catch (const dnnl::error& err) {
    if (DType(k.ab_dtype) == DType::f32)
      throw Error("op matmul: oneDNN cannot build an f32 matmul ({} x {} x {}): {}", k.M, k.N,
                  k.K, err.what());
    static std::atomic<bool> told[16];  // once per operand dtype
    if (!told[k.ab_dtype & 15].exchange(true))
      fmt::print(stderr,
                 "kiln: oneDNN has no {0} matmul on this CPU; {0} matmuls run in f32 on "
                 "operands converted in scratch\n",
                 dtype_name(DType(k.ab_dtype)));
    e.fallback = true;
    return cache.emplace(k, std::move(e)).first->second;
  }
  e.a = dnnl::memory(a_md, cpu_engine(), DNNL_MEMORY_NONE);
  e.b = dnnl::memory(b_md, cpu_engine(), DNNL_MEMORY_NONE);
  e.c = dnnl::memory(c_md, cpu_engine(), DNNL_MEMORY_NONE);
  if (k.bias_dtype >= 0) e.bias = dnnl::memory(bias_md, cpu_engine(), DNNL_MEMORY_NONE);
  return cache.emplace(k, std::move(e)).first->second;
}

void set_strides(const MatView& v, int64_t* s) {
  s[0] = v.batch_stride[0];
  s[1] = v.batch_stride[1];
  s[2] = v.trans ? 1 : v.ld;  // stride of op(v)'s row index
  s[3] = v.trans ? v.ld : 1;
}


// Dense f32 copy of the view's stored matrices: (batch0 * batch1, rows, cols), same orientation.
MatView to_f32(Context& ctx, const MatView& v) {
  const int64_t nb = v.batch[0] * v.batch[1];
  Tensor d = ctx.scratch_tensor({nb, v.rows, v.cols}, DType::f32);
  float* out = d.ptr<float>();
  cpu::dispatch_float(v.t.dtype, "matmul", [&]<typename T>(T) {
    const T* src = static_cast<const T*>(element(v));
#pragma omp parallel for collapse(2) schedule(static) if (nb * v.rows * v.cols > 16384)
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t r = 0; r < v.rows; ++r) {
        const T* s = src + (b / v.batch[1]) * v.batch_stride[0] +
                     (b % v.batch[1]) * v.batch_stride[1] + r * v.ld;
        float* o = out + (b * v.rows + r) * v.cols;
        for (int64_t c = 0; c < v.cols; ++c) o[c] = cpu::load(s[c]);
      }
  });
  MatView f = v;
  f.t = d;
  f.offset = 0;
  f.ld = v.cols;
  f.batch_stride[0] = v.batch[1] * v.rows * v.cols;
  f.batch_stride[1] = v.rows * v.cols;
  return f;
}

// The view's matrices written back from dense f32 (batch0 * batch1, rows, cols).
void from_f32(const MatView& f, const MatView& v) {
  const int64_t nb = v.batch[0] * v.batch[1];
  const float* in = f.t.ptr<float>();
  cpu::dispatch_float(v.t.dtype, "matmul", [&]<typename T>(T) {
    T* dst = static_cast<T*>(element(v));
#pragma omp parallel for collapse(2) schedule(static) if (nb * v.rows * v.cols > 16384)
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t r = 0; r < v.rows; ++r) {
        T* d = dst + (b / v.batch[1]) * v.batch_stride[0] + (b % v.batch[1]) * v.batch_stride[1] +
               r * v.ld;
        const float* s = in + (b * v.rows + r) * v.cols;
        for (int64_t c = 0; c < v.cols; ++c) d[c] = cpu::store<T>(s[c]);
      }
  });
}

// The f32 product of operands converted in scratch (bf16/f16 primitives missing on this CPU).
void matmul_f32_fallback(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
                         const MatmulOpts& opts) {
  const ScratchScope own_scratch(ctx);  // the f32 copies
  const MatView a32 = to_f32(ctx, a), b32 = to_f32(ctx, b);
  Tensor bias32;
  MatmulOpts o = opts;
  if (opts.bias && opts.bias->dtype != DType::f32) {
    bias32 = ctx.scratch_tensor(opts.bias->shape, DType::f32);
    cast(ctx, *opts.bias, bias32);
    o.bias = &bias32;
  }
  if (c.t.dtype == DType::f32) {
    cpu::matmul(ctx, a32, b32, c, o);
    return;
  }
  // beta needs c's current values in the f32 result.
  const MatView c32 = opts.beta != 0.0f ? to_f32(ctx, c) : [&] {
    MatView f = c;
    f.t = ctx.scratch_tensor({c.batch[0] * c.batch[1], c.rows, c.cols}, DType::f32);
    f.offset = 0;
    f.ld = c.cols;
    f.batch_stride[0] = c.batch[1] * c.rows * c.cols;
    f.batch_stride[1] = c.rows * c.cols;
    return f;
  }();
  cpu::matmul(ctx, a32, b32, c32, o);
  from_f32(c32, c);
}

// Batch b of the view, as an unbatched view (one batch level).
MatView batch_of(const MatView& v, int64_t b) {
  MatView one = v;
  one.offset += b * v.batch_stride[0];
  one.batch[0] = 1;
  one.batch_stride[0] = 0;
  return one;
}

// Products with a bias or bias gradient each (MatmulOpts::bias_batch_stride), one by one: each as
// the unbatched product with its vector, bit for bit.
void matmul_vector_batches(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
                           const MatmulOpts& opts) {
  const bool grad = opts.bias_grad != nullptr;
  const Tensor& vectors = grad ? *opts.bias_grad : *opts.bias;
  const int64_t n = grad ? op_rows(a) : op_cols(b);
  const auto vector_bytes = int64_t(dtype_size(vectors.dtype));
  MatmulOpts one = opts;
  one.bias_batch_stride = 0;
  for (int64_t i = 0; i < c.batch[0]; ++i) {
    Tensor vector = Tensor::view(static_cast<std::byte*>(vectors.data) + i * opts.bias_batch_stride * vector_bytes,
                                 {n}, vectors.dtype, vectors.device);
    MatView ai = batch_of(a, i);
    if (grad) {  // batch i's dy as a whole tensor of its own (bias_grad reads the tensor)
      ai.t = Tensor::view(static_cast<std::byte*>(element(ai)), {a.rows, a.cols}, a.t.dtype, a.t.device);
      ai.offset = 0;
      one.bias_grad = &vector;
    } else {
      one.bias = &vector;
    }
    cpu::matmul(ctx, ai, batch_of(b, i), batch_of(c, i), one);
  }
}

}  // namespace

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory::data_type dnnl_type(int64_t dtype) {
  using dt = dnnl::memory::data_type;
  switch (DType(dtype)) {
    case DType::bf16: return dt::bf16;
    case DType::f16: return dt::f16;
    default: return dt::f32;
  }
}

dnnl::post_ops matmul_post_ops(const MatmulKey& k) {
  dnnl::post_ops ops;
  if (k.act != int64_t(Activation::none)) ops.append_eltwise(1.0f, eltwise_alg(Activation(k.act)), 0.0f, 0.0f);
  if (k.beta != 0.0f) ops.append_sum(k.beta);
  return ops;
}

void force_matmul_f32_fallback(bool on) { g_force_fallback.store(on); }
void force_matmul_primitive(bool on) { g_force_matmul.store(on); }

void matmul(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
            const MatmulOpts& opts) {
  static const Tensor no_bias;
  const OpScope scope = expect_cpu(ctx, "matmul", {&a.t, &b.t, &c.t, opts.bias ? opts.bias : &no_bias});
  const auto [M, N, K] = matmul_dims(a, b);
  if (opts.bias_batch_stride != 0) {
    matmul_vector_batches(ctx, a, b, c, opts);
    return;
  }
  if (opts.bias_grad) {  // a is dy (K, M), whole (ops.def)
    cpu::bias_grad(ctx, a.t.reshape({K, M}), *opts.bias_grad);
    MatmulOpts product = opts;
    product.bias_grad = nullptr;
    cpu::matmul(ctx, a, b, c, product);
    return;
  }
  if (M == 0 || N == 0) return;
  if (K == 0) {  // no products: c = beta c
    if (opts.beta == 1.0f) return;
    cpu::dispatch_float(c.t.dtype, "matmul", [&]<typename T>(T) {
      T* base = static_cast<T*>(element(c));
      for (int64_t b0 = 0; b0 < c.batch[0]; ++b0)
        for (int64_t b1 = 0; b1 < c.batch[1]; ++b1)
          for (int64_t m = 0; m < M; ++m) {
            T* row = base + b0 * c.batch_stride[0] + b1 * c.batch_stride[1] + m * c.ld;
            for (int64_t n = 0; n < N; ++n)
              row[n] = cpu::store<T>(opts.beta == 0.0f ? 0.0f : opts.beta * cpu::load(row[n]));
          }
    });
    return;
  }
  MatmulKey k{};
  k.M = M;
  k.N = N;
  k.K = K;
  k.batch[0] = c.batch[0];
  k.batch[1] = c.batch[1];
  set_strides(a, k.a_strides);
  set_strides(b, k.b_strides);
  set_strides(c, k.c_strides);
  k.ab_dtype = int64_t(a.t.dtype);
  k.c_dtype = int64_t(c.t.dtype);
  k.bias_dtype = opts.bias ? int64_t(opts.bias->dtype) : -1;
  k.act = int64_t(opts.act);
  k.alpha = opts.alpha;
  k.beta = opts.beta;
  k.matmul_only = g_force_matmul.load(std::memory_order_relaxed);
  if (a.t.dtype != DType::f32 && g_force_fallback.load(std::memory_order_relaxed)) {
    matmul_f32_fallback(ctx, a, b, c, opts);
    return;
  }
  MatmulEntry& e = cached_matmul(k);
  if (e.fallback) {
    matmul_f32_fallback(ctx, a, b, c, opts);
    return;
  }
  e.a.set_data_handle(element(a));
  e.b.set_data_handle(element(b));
  e.c.set_data_handle(element(c));
  thread_local dnnl::stream stream(cpu_engine());
  if (opts.bias) {
    e.bias.set_data_handle(opts.bias->data);
    execute(e.prim, stream, {{e.a_arg, e.a}, {e.b_arg, e.b}, {DNNL_ARG_BIAS, e.bias}, {e.c_arg, e.c}});
  } else {
    execute(e.prim, stream, {{e.a_arg, e.a}, {e.b_arg, e.b}, {e.c_arg, e.c}});
  }
  stream.wait();
}

}  // namespace kiln::ops::cpu
