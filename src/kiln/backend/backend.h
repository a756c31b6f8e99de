// backend/backend.h — the op table: every numeric op a layer calls, declared once.
// Implemented in backend/cpu/ (oneDNN matmuls, OpenMP loops). Activations are row-major.
// Ops that write gradients of parameters ACCUMULATE (+=); ops that write activations overwrite.
// Every op is deterministic: the same inputs and thread count give bitwise-identical results
// (reductions run in a fixed order; none use atomics).
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "kiln/core/context.h"
#include "kiln/core/dtype.h"
#include "kiln/core/philox.h"
#include "kiln/core/tensor.h"
#include "kiln/backend/xent_norm.h"

namespace kiln::ops {

// ==== typed ops: an execution context and typed tensor views (f32 / bf16 / f16 storage,
// f32 arithmetic); the context's device picks the backend (backend/route.h) ====

// Every element of t (f32, bf16, f16 or i32) = value.
void fill(Context& ctx, Tensor& t, float value);
// dst = src, same dtype and numel; src and dst may be on different devices (host <-> device).
void copy(Context& ctx, const Tensor& src, Tensor& dst);
// A copy of t on ctx.device (t itself when it is there already): moving state onto the device.
Tensor on_device(Context& ctx, const Tensor& t);
// A copy of t in host memory (t itself on the host): reading device state back.
Tensor on_host(Context& ctx, const Tensor& t);
// Uninitialised host memory for data that crosses to and from ctx.device in bulk (checkpoint
// staging): page-locked on a GPU, so that its copies run at full bus speed; plain host memory
// otherwise. Not counted in host_bytes_in_use.
Tensor host_staging_tensor(Context& ctx, const Shape& shape, DType dtype);
// The way a host tensor takes to a GPU without the host or the GPU's compute waiting for the bus
// (a batch's ids, labels and images): staged_copy copies the bytes into page-locked memory on the
// host, a copy stream of the device's own moves them into `landing` while the ops already queued
// run, and the op stream copies them from there into the destination in stream order (device
// memory to device memory: the destination may still be read by those ops). The next staged_copy
// through the same staging waits for that bus copy only, not for the ops.
struct HostStaging {
  Tensor pinned;                  // page-locked host memory, grown as needed
  Tensor landing;                 // device memory, grown as needed (not counted, as `pinned`)
  std::shared_ptr<void> landed;   // a GPU event on the copy stream: pinned -> landing has run
  std::shared_ptr<void> drained;  // a GPU event on the op stream: landing -> destination has run
};
// dst (on ctx.device) = host (a host tensor), same dtype and numel, through `staging`; outside a
// graph capture. On the host and sim an ops::copy.
void staged_copy(Context& ctx, const Tensor& host, Tensor& dst, HostStaging& staging);
// dst = src converted to dst.dtype (f32 / bf16 / f16, rounding to nearest even); same numel.
void cast(Context& ctx, const Tensor& src, Tensor& dst);
// Split master weights (nn/params.h; the CPU backend only): w (f32) as high (bf16: w rounded to
// nearest, ties away from zero) and low (u16: the remainder of w's bits), which join_master turns
// back into w bit for bit. Same numel.
void split_master(Context& ctx, const Tensor& w, Tensor& high, Tensor& low);
void join_master(Context& ctx, const Tensor& high, const Tensor& low, Tensor& w);

// ---- matrix products (oneDNN, primitives cached by shape per thread) ----

// One operand of matmul: matrices of `rows` x `cols` stored row-major with leading dimension
// `ld` (elements between rows), the first at element `offset` of `t`, and up to two batch
// dimensions of sizes batch[0] x batch[1] at strides batch_stride[0], batch_stride[1]
// (elements). `trans` reads the stored matrix transposed. Views let attention read one head
// of q/k/v straight out of a (B*S, H) layout: rows S, cols d, ld H, batch {B, heads},
// batch_stride {S*H, d}, offset 0.
struct MatView {
  Tensor t;
  int64_t offset = 0;
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch[2] = {1, 1};
  int64_t batch_stride[2] = {0, 0};
  bool trans = false;
};
// The whole of a 2-D tensor (rows, cols), optionally transposed.
MatView mat(const Tensor& t, bool trans = false);
// Head h of every row block of x (B*S, heads*d) is one (S, d) matrix; batch {B, heads}.
MatView heads_view(const Tensor& x, int64_t B, int64_t S, int64_t heads, bool trans = false);
// x: (B, heads, S, T) dense, as B*heads matrices (S, T) with batch {B, heads}.
MatView per_head(const Tensor& x, bool trans = false);

// Post-ops applied to alpha * op(A) op(B) (+ bias), before the beta * C sum.
enum class Activation : uint8_t { none, relu, gelu_erf, gelu_tanh };
struct MatmulOpts {
  float alpha = 1.0f;             // must be 1 with a bias
  float beta = 0.0f;          // 1: accumulate into c (f32 weight gradients from bf16 operands)
  const Tensor* bias = nullptr;  // (N) added to every row of the product; f32 or a's dtype
  Activation act = Activation::none;  // needs beta == 0
};

// c = act(alpha * op(a) op(b) + bias) + beta * c, with op(a) (M, K), op(b) (K, N), c (M, N)
// (c.trans must be false) and the same batch sizes. a and b have one dtype (f32, bf16 or f16):
// it decides the arithmetic (products accumulated in f32; f32 operands are never rounded).
// c is f32 or a's dtype. Where oneDNN cannot build the bf16/f16 primitive on this CPU (e.g.
// AVX2 only) the operands are converted to f32 in scratch and the product runs in f32; a
// line on stderr says so once per process.
void matmul(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
            const MatmulOpts& opts = {});

// ---- elementwise: f32 / bf16 / f16 storage, f32 arithmetic; tensors of one element count ----

// out = a + b; out may alias a or b. a, b and out may have different float dtypes.
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
// y = s * x; y may alias x.
void scale(Context& ctx, const Tensor& x, float s, Tensor& y);
// y (N, C) += bias (C) on every row; bias f32 or y's dtype.
void bias_add(Context& ctx, Tensor& y, const Tensor& bias);
// db (C, f32) += column sums of dy (N, C). Every backend sums a column in double over chunks of
// kBiasGradRows rows in row order, then the chunks' sums in chunk order (a GPU gives each
// (chunk, column) a thread: one thread per column walking 8192 rows left an H200 idle).
inline constexpr int64_t kBiasGradRows = 64;
void bias_grad(Context& ctx, const Tensor& dy, Tensor& db);

enum class GeluKind : uint8_t {
  erf,   // 0.5 x (1 + erf(x / sqrt 2)) — BERT / Hugging Face
  tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) — Megatron's bias_gelu
};
void gelu_forward(Context& ctx, GeluKind kind, const Tensor& x, Tensor& y);
// dx = dy * gelu'(x); x is the forward input. dx may alias dy.
void gelu_backward(Context& ctx, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx);

void tanh_forward(Context& ctx, const Tensor& x, Tensor& y);
// dx = dy * (1 - y^2); y is the forward output. dx may alias dy.
void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);

// Dropout keyed by sample: x is SAMPLE-MAJOR — its elements are `samples` equal consecutive
// blocks (first dimension B, or B*S rows ordered (b, s)), block j belonging to the run's sample
// sample_offset + j. sample_offset: one i64 on ctx's device, read when the op runs, so that a
// replayed graph (graph.h) takes each micro-batch's offset. Element i of that block is dropped
// when the Philox stream `rng` at counter (global sample, i) gives a uniform < p; kept elements
// are scaled by 1/(1-p). The mask is a pure function of (rng, global sample, i): independent of
// the micro-batch size and slot, and recomputed by backward.
// element_offset: the blocks are a slice of bigger samples, starting at this element of each
// (a tensor-parallel rank's heads of the attention probabilities).
struct DropoutMask {
  float p = 0.0f;
  RngStream rng{0, 0};
  Tensor sample_offset;
  int64_t samples = 0;
  int64_t element_offset = 0;
};

// y = x with the mask applied; y may alias x. backward applies the same mask to dy.
void dropout_forward(Context& ctx, const Tensor& x, const DropoutMask& mask, Tensor& y);
void dropout_backward(Context& ctx, const Tensor& dy, const DropoutMask& mask, Tensor& dx);

// ---- normalisation and softmax (statistics in f32) ----

// x, y: (N, C) in any float dtype; w, b: (C) f32 or x's dtype; mean, rstd: (N) f32, saved for
// backward.
void layernorm_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps, Tensor& y, Tensor& mean, Tensor& rstd);
// The residual join and the LayerNorm after it in one pass: sum = a + b rounded to its dtype
// (a, b, sum one dtype; sum may alias a or b), then layernorm_forward of sum, bit for bit.
void add_layernorm_forward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& w,
                           const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd);
// dx (N, C) = the input gradient, or dx += it when accumulate_dx (the residual stream's
// gradient, so no separate add pass); dw, db (C, f32) accumulate. Every backend sums a column's
// dy·x̂ and dy in f32 over chunks of kLayerNormGradRows rows in row order, and the chunks' sums
// in double in chunk order.
inline constexpr int64_t kLayerNormGradRows = 32;
void layernorm_backward(Context& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw,
                        Tensor& db, bool accumulate_dx = false);

// Row softmax over the last dimension; y may alias x (same dtype).
void softmax_forward(Context& ctx, const Tensor& x, Tensor& y);
// dx = scale * y * (dy - sum(dy * y)) per row; dx may alias dy.
void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, float scale, Tensor& dx);
// Attention probabilities: scores, probs (B, heads, Sq, Sk); mask (B, Sk) i32, 1 = token,
// 0 = padding (-10000 added to that key's score, BERT's convention); softmax in f32.
void attention_softmax_forward(Context& ctx, const Tensor& scores, const Tensor& mask,
                               Tensor& probs);

// The attention probabilities and their dropout in one pass, bit for bit
//   attention_softmax_forward(scores, mask, probs); dropout_forward(probs, drop) -> dropped.
void attention_probs_forward(Context& ctx, const Tensor& scores, const Tensor& mask,
                             const DropoutMask& drop, Tensor& probs, Tensor& dropped);
// Their backward, with the mask made once, bit for bit
//   dropout_forward(probs, drop) -> dropped (for dv = dropped^T dcontext),
//   softmax_backward(probs, dropout_backward(dprobs, drop), scale) -> dscores.
// probs, dprobs, dscores, dropped: (B, heads, Sq, Sk). dprobs is consumed (a backend may
// overwrite it); dscores may be probs or dprobs itself.
void attention_probs_backward(Context& ctx, const Tensor& probs, Tensor& dprobs, const DropoutMask& drop,
                              float scale, Tensor& dscores, Tensor& dropped);

// ---- rows: embedding lookups ----

// out (n, dim) row i = table (num, dim) row ids[i] - first; ids (n) i32. The table holds the rows
// [first, first + num) of a larger one (a vocab-parallel rank's part): an id outside them gives a
// zero row. Whether ids lie in the whole table is the data loader's / the model's host-side batch
// check's business, not this op's.
void gather_rows(Context& ctx, const Tensor& table, const Tensor& ids, Tensor& out, int64_t first = 0);
// dtable row ids[i] - first += dy row i, summed in the order of i (deterministic); ids outside
// [first, first + num) are skipped (as in gather_rows); any float dtypes.
void scatter_add_rows(Context& ctx, const Tensor& dy, const Tensor& ids, Tensor& dtable, int64_t first = 0);

// ---- losses (typed: double accumulation; labels i32) ----
// Totals that ops accumulate on the device and the host reads back once (ops::copy into a
// host view) are f64 values held in i64 tensors: DType has no f64, the bits are a double's.

// Softmax cross-entropy over the rows of logits (N, V) (f32, bf16 or f16; arithmetic in f32,
// sums in double) with targets q_i = (1 - ls)·onehot(label_i) + ls/V.
// labels (N) i32: in [0, V), or negative for an ignored row (a kiln::Error when >= V; loaders
// validate labels, this only keeps a bad one from reading out of bounds; on CUDA, which does not
// read labels on the host, such a row makes totals[0] NaN instead). weights (N) f32
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
// with c_i = xent_row_factor(weights, i, scale, norm.divisor(totals)) (backend/xent_norm.h):
// totals (3) are the forward's, read on the device when the op runs. Ignored rows get 0. The
// per-row gradient is written directly; dlogits is overwritten.
void softmax_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                           const Tensor& labels, const Tensor& weights, float label_smoothing,
                           float scale, const Tensor& totals, XentNorm norm, Tensor& dlogits);

// Vocab-parallel softmax cross-entropy (tensor parallelism): logits (N, Vs) are columns
// [start, start + Vs) of the whole (N, V) logits; labels (N) i32 are whole-vocabulary ids
// (negative: ignored row). The caller combines the ranks' results (max, sums) in between.
// partials (N, 3) f32 per row: this shard's max, the whole-vocabulary id of its first argmax
// (exact below 2^24), and the label's logit when the label is in this shard, else 0.
void vocab_xent_partials(Context& ctx, const Tensor& logits, const Tensor& labels, int64_t start,
                         Tensor& partials);
// sumexp (N) f64 = Σ_v exp(z_iv - max_i) over this shard, summed in double (each exp in f32 on the
// CPU, as softmax_xent_forward's, in double on CUDA); max (N) f32, the global max.
void vocab_xent_sumexp(Context& ctx, const Tensor& logits, const Tensor& max, Tensor& sumexp);
// combined (3, N) f32 from every rank's partials, gathered (R, N, 3) f32 in rank order: row 0 the
// global max, row 1 the first argmax (the lowest rank among equal maxima: ranks hold ascending
// vocabulary ranges), row 2 the label's logit (held by one rank, 0 on the others; added in f32 in
// rank order).
void vocab_xent_combine(Context& ctx, const Tensor& gathered, Tensor& combined);
// From combined (3, N) and the whole rows' sumexp (N) f64 under that max: lse (N) f32 =
// f32(max + log(sumexp)) and totals (3) as softmax_xent_forward's (f64 in i64, rows in order):
// Σ w_i · (lse_i - label logit_i), Σ w_i, and the hits (w_i > 0, argmax == label) over rows with
// a label >= 0. weights (N) f32, or undefined for 1.
void vocab_xent_totals(Context& ctx, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                       const Tensor& weights, Tensor& lse, Tensor& totals);
// dlogits (N, Vs) = c_i · (exp(z_iv - lse_i) - [start + v == label_i]), c_i from totals (3) and
// norm as softmax_xent_backward's (lse (N) f32 the whole rows' log-sum-exp); ignored rows get 0.
void vocab_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                         const Tensor& labels, const Tensor& weights, int64_t start, float scale,
                         const Tensor& totals, XentNorm norm, Tensor& dlogits);

// ---- optimizer updates and multi-tensor norms (typed: f32 master weights, gradients and
// state; double sums) ----
// A multi-tensor op runs over segments of flat buffers: segment k covers elements
// [offset, offset + numel) of every flat buffer the op takes (a parameter of a ParamStore;
// padding between segments is not touched). Sums are taken in double: a segment is cut into
// chunks of kSumChunk elements, lane l of a chunk sums its elements l, l + kSumLanes, ..., and the
// lane sums of all chunks are added in chunk and lane order (the CPU: one chain; CUDA: a fixed
// tree, groups of chunks then the groups, backend/cuda/optim_bodies.h — equal up to the rounding
// of double additions). The result does not depend on the thread count or the launch size.
struct TensorSegment {
  int64_t offset = 0, numel = 0;
  bool decay = true;  // weight decay (and LARS's trust ratio) applies
};
inline constexpr int64_t kSumChunk = 1 << 14;
inline constexpr int64_t kSumLanes = 32;

// The step's scalars: the values of an optimizer step that change from step to step and the
// decisions it takes from its gradients, in one small tensor on the device (kStepScalars f64 in
// i64), so that the ops of the optimizer phase read them from device memory at run time rather
// than as arguments. The host writes the inputs (and resets the outputs) before the phase and reads
// the block back once after it; nothing in between waits for the host, and a captured step (a CUDA
// graph, which freezes arguments) reads each replay's values.
enum StepScalar : int {
  kStepLr,           // input: learning rate (used as f32)
  kStepBc1,          // input: Adam's 1 - beta1^t (1 without bias correction), an f32 value
  kStepBc2,          // input: 1 - beta2^t, likewise
  kStepUnscale,      // input: 1 / loss scale (1 without loss scaling), used as f32
  kStepMaxNorm,      // input: the clipping threshold of the global gradient norm (0: no clipping)
  kStepLoss,         // input: the step's loss; not finite skips the step
  kStepNormSquares,  // output: Σ g² over the parameters that count for the norm, every group
  kStepNorm,         // output: sqrt(kStepNormSquares)
  kStepGradFactor,   // output: f32(max_norm / norm) when clipping applies, else 1 (input 1 to start)
  kStepSkip,         // output: 1 = the loss or the norm is not finite: no update, else 0
  kStepScalars
};

// sums (n) f64 in i64 (n = segments.size()): Σ a² over segment k; with b defined, sums is (n, 2)
// and row k holds (Σ a², Σ b²). a, b: flat f32; or a split master's low halves (u16) as a with its
// high halves (bf16) as a_high (below).
void segment_sum_squares(Context& ctx, const Tensor& a, const Tensor& b,
                         std::span<const TensorSegment> segments, Tensor& sums, const Tensor& a_high = {});
// x *= factor over every element of x (f32).
void scale_all(Context& ctx, Tensor& x, float factor);
// x *= f32(scalars[slot]) over every element of x (f32); scalars: the step's scalars.
void scale_by_step_scalar(Context& ctx, Tensor& x, const Tensor& scalars, StepScalar slot);
// scalars[kStepNormSquares] = Σ sums[k] over the k with owners[k] != 0, added in order of k;
// sums (n) f64 in i64 (segment_sum_squares), owners (n) i32.
void step_norm_squares(Context& ctx, const Tensor& sums, const Tensor& owners, Tensor& scalars);
// From kStepNormSquares (summed over the ranks by then), kStepLoss and kStepMaxNorm: kStepNorm,
// kStepSkip (loss or norm not finite) and kStepGradFactor (max_norm > 0 and norm > max_norm:
// f32(max_norm / norm), else 1).
void step_decide(Context& ctx, Tensor& scalars);

// One Adam step's constants. The step's own values come from the step's scalars: lr, bc1, bc2
// (rounded to f32) and the gradient factor (clipping folded into the update: the gradients
// count as factor·g; g is only read).
struct AdamStep {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
};
// Every optimizer update below does nothing when scalars[kStepSkip] != 0 (weights, compute copy
// and state untouched). For every element of every segment, in f32 (wd = weight_decay where
// decay, else 0; g read as f32(factor·g)):
//   m = b1·m + (1-b1)·g;  v = b2·v + (1-b2)·g²;  u = (m/bc1) / (sqrt(v/bc2) + eps) + wd·w
// adamw_update:  w -= lr·u.
// w, g, m, v: flat f32; w_compute: flat bf16/f16 copy of w refreshed in the same pass
// (= cast(w)), or undefined. Split master weights (split_master; the CPU backend only): w is the
// low halves (u16) and w_compute the high halves (bf16), both read and written.
void adamw_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& w_compute);
// LAMB, pass 1: the moments above, and norms (n, 2) f64 in i64: (Σ w², Σ u²) per segment.
// Skipped: norms are zeros.
// w_compute: the high halves of split master weights (above), else unused.
void lamb_moments(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  const Tensor& w, const Tensor& w_compute, const Tensor& g, Tensor& m, Tensor& v, Tensor& norms);
// LAMB, pass 2: r = ‖w‖/‖u‖ per segment (1 if either is 0), from pass 1's norms;
// w -= f32(lr·r)·u with u recomputed from m, v, w; w_compute refreshed as in adamw_update.
void lamb_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& m, const Tensor& v, Tensor& w_compute);

// LARS's constants; the learning rate comes from the step's scalars.
struct LarsStep {
  float momentum = 0.9f, weight_decay = 0, eeta = 0.001f, epsilon = 0;
};
// LARS (MLPerf ResNet reference) with norms (n, 2) = (Σ w², Σ g²) per segment from
// segment_sum_squares(w, g). Per segment: where decay, r = eeta·‖w‖ / (‖g‖ + wd·‖w‖ + epsilon)
// (1 if ‖w‖ or ‖g‖ is 0) and s = f32(lr·r), wd = weight_decay; elsewhere s = lr, wd = 0. Then
// per element: v = momentum·v + s·(g + wd·w); w -= v; w_compute refreshed as above.
void lars_update(Context& ctx, const LarsStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& g, Tensor& momentum, Tensor& w_compute);

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
// x (N, H, W, C), dy (N, P, Q, K) (one dtype) -> dw (K, C/groups, R, S) f32, added to what is
// there, or written over it when !accumulate (a step's first contribution: no zero fill first).
void conv2d_backward_weights(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy,
                             Tensor& dw, bool accumulate = true);
// Whether oneDNN creates `dtype` convolution primitives on this CPU (false: the f32 fallback).
bool conv2d_native(DType dtype);
// The most scratch (ctx.scratch) each of the CPU backend's three passes of shape s takes at once,
// bytes: a window-product weight gradient's gathered windows and product, the f32 copies where
// oneDNN has no `dtype` kernel. A dry run's estimate; `accumulate` as for conv2d_backward_weights.
struct ConvScratch {
  int64_t forward = 0, backward_data = 0, backward_weights = 0;
  int64_t most() const { return std::max({forward, backward_data, backward_weights}); }
};
ConvScratch conv2d_scratch_bytes(const ConvShape& s, DType dtype, bool accumulate);

// Batch norm over the rows (N*H*W) of x (N, H, W, C) (any rank: the last dimension is C).
// gamma, beta, mean, var: (C) f32. Statistics in fp32 with partial sums in double combined in a
// fixed order. With `relu`, y = max(bn(x), 0) (fused). x, y (and dy, dx) share one dtype.
// A defined `residual` (x's shape and dtype) is added before the ReLU: y = max?(bn(x) + residual),
// a ResNet block's join in the same pass (batchnorm_backward does not differentiate it: the block
// takes the ReLU's gradient itself, and passes the gradient of bn(x) with relu false).
// Training: mean (C) and biased var (C) are computed from x and written out.
void batchnorm_train_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, float eps, bool relu, Tensor& y, Tensor& mean,
                             Tensor& var, const Tensor& residual = Tensor{});
// Inference: normalise with the given mean and var (running statistics).
void batchnorm_eval_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& var, float eps,
                            bool relu, Tensor& y, const Tensor& residual = Tensor{});
// Backward of either forward; `training` says whether mean/var were batch statistics (their
// dependence on x is then differentiated). y is the forward output (used for the ReLU mask).
// dx is overwritten; dgamma, dbeta (C) f32 accumulate.
void batchnorm_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps,
                        bool relu, bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta);
// SyncBN: the training forward and backward in steps between which the caller sums the f64
// channel sums over the ranks (dist::Communicator), so that every rank normalises with the
// statistics of the whole global batch (`total_rows` rows over all ranks):
//   batchnorm_channel_sums: sum (C) f64 = Σ_rows x.
//   batchnorm_channel_deviations: squares (C) f64 = Σ_rows (x - sum / total_rows)², the mean in
//     double from the summed `sum`.
//   batchnorm_stats_from_sums: mean = sum / rows, var = squares / rows (biased), f32.
//   Then batchnorm_eval_forward normalises with them and batchnorm_update_running takes them.
//   batchnorm_backward_sums: sums (2C) f64 = [Σ g, Σ g·(x - mean)] of this rank's rows.
//   batchnorm_backward_from_sums: dgamma, dbeta += this rank's `local_sums`; dx from
//     `global_sums` (the sums over every rank) and `total_rows`.
// With one rank (global = local, total_rows = rows) they compute what the fused ops compute.
void batchnorm_channel_sums(Context& ctx, const Tensor& x, Tensor& sum);
void batchnorm_channel_deviations(Context& ctx, const Tensor& x, const Tensor& sum, int64_t total_rows,
                                  Tensor& squares);
void batchnorm_stats_from_sums(Context& ctx, const Tensor& sum, const Tensor& squares, int64_t rows, Tensor& mean,
                               Tensor& var);
void batchnorm_backward_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& mean,
                             bool relu, Tensor& sums);
void batchnorm_backward_from_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                                  const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps, bool relu,
                                  const Tensor& local_sums, const Tensor& global_sums, int64_t total_rows, Tensor& dx,
                                  Tensor& dgamma, Tensor& dbeta);
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
// A defined dy2 (dy's shape and dtype) is added to dy first (in f32, rounded once): a residual
// block's output gradient arrives as the next block's main-path and shortcut parts, summed here
// instead of in a pass of their own.
void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, const Tensor& dy2 = Tensor{});
// y += x: the shortcut's gradient joining the main branch's at a residual block's input.
void residual_add(Context& ctx, const Tensor& x, Tensor& y);
// ==== end of CNN ops ====

}  // namespace kiln::ops
