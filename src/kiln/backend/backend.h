// backend/backend.h — the op table: every numeric op a layer calls, declared once.
// Implemented in backend/cpu/ (oneDNN matmuls, OpenMP loops). All activations are row-major f32.
// Ops that write gradients of parameters ACCUMULATE (+=); ops that write activations overwrite.
// Every op is deterministic: the same inputs and thread count give bitwise-identical results
// (reductions run in a fixed order; none use atomics).
#pragma once
#include <cstdint>

#include "kiln/core/context.h"
#include "kiln/core/dtype.h"
#include "kiln/core/philox.h"
#include "kiln/core/tensor.h"

namespace kiln::ops {

// ==== typed ops: an execution context and typed tensor views (f32 / bf16 / f16 storage,
// f32 arithmetic); the context's device picks the backend (backend/route.h) ====

// Every element of t (f32, bf16, f16 or i32) = value.
void fill(Context& ctx, Tensor& t, float value);
// dst = src, same dtype and numel; src and dst may be on different devices (host <-> device).
void copy(Context& ctx, const Tensor& src, Tensor& dst);
// dst = src converted to dst.dtype (f32 / bf16 / f16, rounding to nearest even); same numel.
void cast(Context& ctx, const Tensor& src, Tensor& dst);

// ---- matrix products (oneDNN, primitives cached by shape) ----

// Operand type of gemm / gemm_batched: f32 (default) or bf16 (operands rounded to bf16,
// products accumulated and written in f32). Process-wide; set it before training starts.
// Throws kiln::Error for other types.
void set_matmul_dtype(DType dtype);
DType matmul_dtype();

// C = alpha * op(A) * op(B) + beta * C, row-major. op(A) is (M, K), op(B) is (K, N), C is (M, N).
// A is stored (M, K) with leading dimension lda, or (K, M) when trans_a; likewise B.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc);
// `batch` independent gemms; matrix i starts at A + i*stride_a, B + i*stride_b, C + i*stride_c.
void gemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, int64_t stride_a, const float* B, int64_t ldb,
                  int64_t stride_b, float beta, float* C, int64_t ldc, int64_t stride_c,
                  int64_t batch);

// ---- elementwise ----

void add(const float* a, const float* b, int64_t n, float* out);  // out = a + b
void add_inplace(float* y, const float* x, int64_t n);            // y += x
void scale_inplace(float* y, float s, int64_t n);                 // y *= s

// y: (N, C) += bias (C) on every row.
void bias_add(float* y, const float* bias, int64_t N, int64_t C);
// db (C) += column sums of dy (N, C).
void bias_grad(const float* dy, int64_t N, int64_t C, float* db);

enum class GeluKind : uint8_t {
  erf,   // 0.5 x (1 + erf(x / sqrt 2)) — BERT / Hugging Face
  tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) — Megatron's bias_gelu
};
void gelu_forward(GeluKind kind, const float* x, int64_t n, float* y);
// dx = dy * gelu'(x); x is the forward input.
void gelu_backward(GeluKind kind, const float* x, const float* dy, int64_t n, float* dx);

void tanh_forward(const float* x, int64_t n, float* y);
// dx = dy * (1 - y^2); y is the forward output.
void tanh_backward(const float* y, const float* dy, int64_t n, float* dx);

// Dropout with a Philox mask: element i is dropped when rng.uniform(i) < p, kept elements are
// scaled by 1/(1-p). The mask is a pure function of (rng, i), so backward recomputes it.
void dropout_forward(const float* x, int64_t n, float p, const RngStream& rng, float* y);
void dropout_backward(const float* dy, int64_t n, float p, const RngStream& rng, float* dx);

// ---- normalisation and softmax (statistics in fp32) ----

// x, y: (N, C); w, b: (C); mean, rstd: (N) saved for backward.
void layernorm_forward(const float* x, const float* w, const float* b, float eps, int64_t N,
                       int64_t C, float* y, float* mean, float* rstd);
// dx (N, C) is overwritten; dw, db (C) accumulate.
void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean,
                        const float* rstd, int64_t N, int64_t C, float* dx, float* dw,
                        float* db);

// Row softmax: x, y (rows, cols); y may alias x.
void softmax_forward(const float* x, int64_t rows, int64_t cols, float* y);
// dx = scale * y * (dy - sum(dy * y)) per row; dx may alias dy.
void softmax_backward(const float* y, const float* dy, int64_t rows, int64_t cols, float scale,
                      float* dx);
// Attention probabilities: x, y (B, heads, Sq, Sk); key_bias (B, Sk) added to every row of
// batch b; y = softmax(x + key_bias[b]). y may alias x.
void masked_softmax_forward(const float* x, const float* key_bias, int64_t B, int64_t heads,
                            int64_t Sq, int64_t Sk, float* y);

// ---- rows: embedding lookups, attention head layout ----

// out (n, dim) row i = table row ids[i]; throws kiln::Error if an id is outside [0, num).
void gather_rows(const float* table, int64_t num, int64_t dim, const int32_t* ids, int64_t n,
                 float* out);
// dtable row ids[i] += dy row i, summed in the order of i (deterministic).
void scatter_add_rows(const float* dy, const int32_t* ids, int64_t n, int64_t dim,
                      float* dtable);

// (B, S, heads, d) <-> (B, heads, S, d).
void split_heads(const float* x, int64_t B, int64_t S, int64_t heads, int64_t d, float* y);
void merge_heads(const float* x, int64_t B, int64_t S, int64_t heads, int64_t d, float* y);

// ---- losses (fp32 inputs, double accumulation) ----

// Per row of logits (N, V): lse[i] = log sum exp(logits[i]); argmax[i] = first index of the max.
void logsumexp_rows(const float* logits, int64_t N, int64_t V, float* lse, int32_t* argmax);
// dlogits[i] = scale * coef[i] * (softmax(logits[i]) - onehot(target[i])), softmax from the
// saved lse; target < 0 means no onehot.
void softmax_xent_backward(const float* logits, const float* lse, const int32_t* target,
                           const float* coef, float scale, int64_t N, int64_t V,
                           float* dlogits);

// ==== CNN ops: convolution, batch norm, pooling, ReLU over NHWC activations ====
// Typed ops (a Context and tensor views). Activations are (N, H, W, C) in f32, bf16 or f16
// storage; convolution weights keep PyTorch's (K, C/groups, R, S) in the activations' dtype;
// weight gradients, BN parameters and BN statistics are f32. Arithmetic is f32 (oneDNN
// accumulates convolutions in f32; BN sums in double, as below).

// One 2-D convolution's geometry: input (N, H, W, C) -> output (N, P, Q, K). The ops check their
// tensors against it; it is also the primitive cache key.
struct ConvShape {
  int64_t N = 1, H = 1, W = 1, C = 1;  // input
  int64_t K = 1, R = 1, S = 1;         // output channels, kernel height, kernel width
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int64_t groups = 1;  // C and K are multiples of groups
  int64_t P() const { return (H + 2 * pad_h - dil_h * (R - 1) - 1) / stride_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - dil_w * (S - 1) - 1) / stride_w + 1; }
};

// oneDNN convolutions, primitives cached by (shape, dtype) per thread; the weights are
// reordered from (K, C/groups, R, S) to the primitive's preferred layout on each call. Where
// oneDNN has no primitive for a low-precision dtype on this CPU (bf16 without AVX-512, f16
// without AVX-512-FP16), the op says so once on stderr and computes in f32 on converted copies.
// x (N, H, W, C), w (K, C/groups, R, S) -> y (N, P, Q, K), overwritten; x, w, y one dtype.
void conv2d_forward(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& w,
                    Tensor& y);
// dy (N, P, Q, K), w -> dx (N, H, W, C), overwritten; dy, w, dx one dtype.
void conv2d_backward_data(Context& ctx, const ConvShape& s, const Tensor& dy, const Tensor& w,
                          Tensor& dx);
// x (N, H, W, C), dy (N, P, Q, K) (one dtype) -> dw (K, C/groups, R, S) f32, accumulated.
void conv2d_backward_weights(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy,
                             Tensor& dw);
// Whether oneDNN creates `dtype` convolution primitives on this CPU (false: the f32 fallback).
bool conv2d_native(DType dtype);

// Batch norm over the rows (N*H*W) of x (N, H, W, C) (any rank: the last dimension is C).
// gamma, beta, mean, var: (C) f32. Statistics in fp32 with partial sums in double combined in a
// fixed order. With `relu`, y = max(bn(x), 0) (fused). x, y (and dy, dx) share one dtype.
// Training: mean (C) and biased var (C) are computed from x and written out.
void batchnorm_train_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, float eps, bool relu, Tensor& y, Tensor& mean,
                             Tensor& var);
// Inference: normalise with the given mean and var (running statistics).
void batchnorm_eval_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& var, float eps,
                            bool relu, Tensor& y);
// Backward of either forward; `training` says whether mean/var were batch statistics (their
// dependence on x is then differentiated). y is the forward output (used for the ReLU mask).
// dx is overwritten; dgamma, dbeta (C) f32 accumulate.
void batchnorm_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps,
                        bool relu, bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta);
// PyTorch's running statistics after a training forward over `rows` rows (all f32, (C)):
// running_mean = (1 - momentum) running_mean + momentum mean,
// running_var = (1 - momentum) running_var + momentum var rows/(rows - 1) (unbiased),
// num_batches_tracked (1) += 1.
void batchnorm_update_running(Context& ctx, const Tensor& mean, const Tensor& var, int64_t rows,
                              float momentum, Tensor& running_mean, Tensor& running_var,
                              Tensor& num_batches_tracked);

// Max pooling, PyTorch semantics (padding never wins; the first maximum in scan order wins).
struct PoolShape {
  int64_t N = 1, H = 1, W = 1, C = 1;
  int64_t R = 1, S = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t P() const { return (H + 2 * pad_h - R) / stride_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - S) / stride_w + 1; }
};
// x (N, H, W, C) -> y (N, P, Q, C) (same dtype); argmax (N, P, Q, C) i32 holds the winner's
// h*W + w.
void maxpool_forward(Context& ctx, const PoolShape& s, const Tensor& x, Tensor& y,
                     Tensor& argmax);
// dx (N, H, W, C) is overwritten with the routed dy (N, P, Q, C) (same dtype), summed in f32.
void maxpool_backward(Context& ctx, const PoolShape& s, const Tensor& dy, const Tensor& argmax,
                      Tensor& dx);

// Global average pool: x (N, H, W, C) -> y (N, C), summed in f32; backward spreads dy / (H*W),
// overwriting dx (N, H, W, C). Input and output dtypes may differ (a bf16 body, an f32 head).
void global_avgpool_forward(Context& ctx, const Tensor& x, Tensor& y);
void global_avgpool_backward(Context& ctx, const Tensor& dy, Tensor& dx);

// y = max(x, 0) (y may alias x); dx = dy where y > 0, else 0 (dx may alias dy). One dtype.
void relu_forward(Context& ctx, const Tensor& x, Tensor& y);
void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
// y = max(a + b, 0): the residual join of a ResNet block. y may alias a or b.
void add_relu_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
// y += x: the shortcut's gradient joining the main branch's at a residual block's input.
void residual_add(Context& ctx, const Tensor& x, Tensor& y);
// ==== end of CNN ops ====

}  // namespace kiln::ops
