// backend/backend.h — the op table: every numeric op a layer calls, declared once.
// Implemented in backend/cpu/ (oneDNN matmuls, OpenMP loops). All activations are row-major f32.
// Ops that write gradients of parameters ACCUMULATE (+=); ops that write activations overwrite.
// Every op is deterministic: the same inputs and thread count give bitwise-identical results
// (reductions run in a fixed order; none use atomics).
#pragma once
#include <cstdint>
#include <span>

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

// ---- losses (typed: double accumulation; labels i32) ----
// Totals that ops accumulate on the device and the host reads back once (ops::copy into a
// host view) are f64 values held in i64 tensors: DType has no f64, the bits are a double's.

// Softmax cross-entropy over the rows of logits (N, V) (f32, bf16 or f16; arithmetic in f32,
// sums in double) with targets q_i = (1 - ls)·onehot(label_i) + ls/V.
// labels (N) i32: in [0, V), or negative for an ignored row (a kiln::Error when >= V; loaders
// validate labels, this only keeps a bad one from reading out of bounds). weights (N) f32
// (masked_lm_weights), or an undefined tensor for weight 1 on every row.
// Writes lse (N) f32, log-sum-exp of each row (saved for backward), and totals (3), f64 in i64:
//   [0] Σ w_i · (lse_i - (1-ls)·z_i[label_i] - ls·Σ_v z_iv / V)  over rows with label_i >= 0,
//       summed in row order (deterministic for any thread count)
//   [1] Σ w_i over rows with label_i >= 0
//   [2] #{i : label_i >= 0, w_i > 0, first argmax of z_i == label_i}
void softmax_xent_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                          const Tensor& weights, float label_smoothing, Tensor& lse,
                          Tensor& totals);
// dlogits (N, V) (any float dtype) = c_i · (softmax(z_i) - q_i), softmax from the saved lse,
// with c_i = scale · f32(w_i / norm) (norm: the loss's divisor, e.g. Σ w + 1e-5); ignored
// rows get 0. The per-row gradient is written directly; dlogits is overwritten.
void softmax_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                           const Tensor& labels, const Tensor& weights, float label_smoothing,
                           float scale, double norm, Tensor& dlogits);

// ---- optimizer updates and multi-tensor norms (typed: f32 master weights, gradients and
// state; double sums) ----
// A multi-tensor op runs over segments of flat buffers: segment k covers elements
// [offset, offset + numel) of every flat buffer the op takes (a parameter of a ParamStore;
// padding between segments is not touched). Sums are taken in double over chunks of
// kSumChunk elements of a segment, and the chunk sums are added in index order: the result does
// not depend on the thread count.
struct TensorSegment {
  int64_t offset = 0, numel = 0;
  bool decay = true;  // weight decay (and LARS's trust ratio) applies
};
inline constexpr int64_t kSumChunk = 1 << 14;

// sums (n) f64 in i64 (n = segments.size()): Σ a² over segment k; with b defined, sums is (n, 2)
// and row k holds (Σ a², Σ b²). a, b: flat f32.
void segment_sum_squares(Context& ctx, const Tensor& a, const Tensor& b,
                         std::span<const TensorSegment> segments, Tensor& sums);
// x *= factor over every element of x (f32).
void scale_all(Context& ctx, Tensor& x, float factor);
// x *= factor, and found (1) i32 = 1 when any element of x is then inf or NaN, else 0.
void scale_check_finite(Context& ctx, Tensor& x, float factor, Tensor& found);

// One Adam step's scalars; bc1, bc2 = 1 - beta^t (1 without bias correction), rounded to f32.
struct AdamStep {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
  float bc1 = 1, bc2 = 1;
};
// For every element of every segment, in f32 (wd = weight_decay where decay, else 0):
//   m = b1·m + (1-b1)·g;  v = b2·v + (1-b2)·g²;  u = (m/bc1) / (sqrt(v/bc2) + eps) + wd·w
// adamw_update:  w -= lr·u.
// w, g, m, v: flat f32; w_compute: flat bf16/f16 copy of w refreshed in the same pass
// (= cast(w)), or undefined.
void adamw_update(Context& ctx, const AdamStep& p, std::span<const TensorSegment> segments,
                  Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& w_compute);
// LAMB, pass 1: the moments above, and norms (n, 2) f64 in i64: (Σ w², Σ u²) per segment.
void lamb_moments(Context& ctx, const AdamStep& p, std::span<const TensorSegment> segments,
                  const Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& norms);
// LAMB, pass 2: r = ‖w‖/‖u‖ per segment (1 if either is 0), from pass 1's norms;
// w -= f32(lr·r)·u with u recomputed from m, v, w; w_compute refreshed as in adamw_update.
void lamb_update(Context& ctx, const AdamStep& p, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& m, const Tensor& v,
                 Tensor& w_compute);

struct LarsStep {
  float lr = 0, momentum = 0.9f, weight_decay = 0, eeta = 0.001f, epsilon = 0;
};
// LARS (MLPerf ResNet reference) with norms (n, 2) = (Σ w², Σ g²) per segment from
// segment_sum_squares(w, g). Per segment: where decay, r = eeta·‖w‖ / (‖g‖ + wd·‖w‖ + epsilon)
// (1 if ‖w‖ or ‖g‖ is 0) and s = f32(lr·r), wd = weight_decay; elsewhere s = lr, wd = 0. Then
// per element: v = momentum·v + s·(g + wd·w); w -= v; w_compute refreshed as above.
void lars_update(Context& ctx, const LarsStep& p, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& g, Tensor& momentum,
                 Tensor& w_compute);

// ==== CNN ops (issue 4): convolution, batch norm, pooling, ReLU over NHWC activations ====
// Activations are (N, H, W, C) f32; convolution weights keep PyTorch's (K, C/groups, R, S).

// One 2-D convolution: input (N, H, W, C) -> output (N, P, Q, K). Also the primitive cache key.
struct ConvShape {
  int64_t N = 1, H = 1, W = 1, C = 1;  // input
  int64_t K = 1, R = 1, S = 1;         // output channels, kernel height, kernel width
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int64_t groups = 1;  // C and K are multiples of groups
  int64_t P() const { return (H + 2 * pad_h - dil_h * (R - 1) - 1) / stride_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - dil_w * (S - 1) - 1) / stride_w + 1; }
};

// oneDNN convolutions, primitives cached by shape (per thread); the weights are reordered from
// (K, C/groups, R, S) to the primitive's preferred layout on each call.
// x (N, H, W, C), w (K, C/groups, R, S) -> y (N, P, Q, K), overwritten.
void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y);
// dy (N, P, Q, K), w -> dx (N, H, W, C), overwritten.
void conv2d_backward_data(const ConvShape& s, const float* dy, const float* w, float* dx);
// x (N, H, W, C), dy (N, P, Q, K) -> dw (K, C/groups, R, S), accumulated.
void conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw);

// Batch norm over `rows` = N*H*W rows of C channels, statistics in fp32 with partial sums in
// double combined in a fixed order. With `relu`, y = max(bn(x), 0) (fused).
// Training: mean (C) and biased var (C) are computed from x and written out.
void batchnorm_train_forward(const float* x, const float* gamma, const float* beta,
                             int64_t rows, int64_t C, float eps, bool relu, float* y,
                             float* mean, float* var);
// Inference: normalise with the given mean and var (running statistics).
void batchnorm_eval_forward(const float* x, const float* gamma, const float* beta,
                            const float* mean, const float* var, int64_t rows, int64_t C,
                            float eps, bool relu, float* y);
// Backward of either forward; `training` says whether mean/var were batch statistics (their
// dependence on x is then differentiated). y is the forward output (used for the ReLU mask).
// dx (rows, C) is overwritten; dgamma, dbeta (C) accumulate.
void batchnorm_backward(const float* x, const float* y, const float* dy, const float* gamma,
                        const float* mean, const float* var, int64_t rows, int64_t C, float eps,
                        bool relu, bool training, float* dx, float* dgamma, float* dbeta);

// Max pooling, PyTorch semantics (padding never wins; the first maximum in scan order wins).
struct PoolShape {
  int64_t N = 1, H = 1, W = 1, C = 1;
  int64_t R = 1, S = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t P() const { return (H + 2 * pad_h - R) / stride_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - S) / stride_w + 1; }
};
// x (N, H, W, C) -> y (N, P, Q, C); argmax (N, P, Q, C) holds the winner's h*W + w.
void maxpool_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax);
// dx (N, H, W, C) is overwritten with the routed dy (N, P, Q, C).
void maxpool_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx);

// Global average pool: x (N, H*W, C) -> y (N, C); backward spreads dy / (H*W), overwriting dx.
void global_avgpool_forward(const float* x, int64_t N, int64_t HW, int64_t C, float* y);
void global_avgpool_backward(const float* dy, int64_t N, int64_t HW, int64_t C, float* dx);

// y = max(x, 0) (y may alias x); dx = dy where y > 0, else 0 (dx may alias dy).
void relu_forward(const float* x, int64_t n, float* y);
void relu_backward(const float* y, const float* dy, int64_t n, float* dx);
// y = max(a + b, 0): the residual join of a ResNet block. y may alias a or b.
void add_relu_forward(const float* a, const float* b, int64_t n, float* y);
// ==== end of CNN ops ====

}  // namespace kiln::ops
