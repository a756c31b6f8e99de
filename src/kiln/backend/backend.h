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
// f32 arithmetic); the context's device picks the backend (backend/route.h). The op list
// (backend/ops.def) declares, with its contract, every op whose dispatch is "the CUDA backend on
// a CUDA context, else the CPU backend" (at the end of this file); here are the types they take,
// and the ops with a dispatch of their own, which the list cannot declare: copy and the transfers
// cross devices, split_master and join_master run on the CPU only, and conv2d_native and
// conv2d_scratch_bytes are questions about the CPU backend without a context ====

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
// Split master weights (nn/params.h; the CPU backend only): w (f32) as high (bf16: w rounded to
// nearest, ties away from zero) and low (u16: the remainder of w's bits), which join_master turns
// back into w bit for bit. Same numel.
void split_master(Context& ctx, const Tensor& w, Tensor& high, Tensor& low);
void join_master(Context& ctx, const Tensor& high, const Tensor& low, Tensor& w);

// ---- matmul: matrix products ----
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
  // With one batch level (batch[1] == 1): batch b's bias (or bias gradient) starts at element
  // b * bias_batch_stride of `bias` (`bias_grad`): several layers' products in one call, each with
  // its own vector (a bias f32 or c's dtype).
  int64_t bias_batch_stride = 0;
  Activation act = Activation::none;  // needs beta == 0
  // A weight gradient's bias gradient from the same dy (ops.def, matmul): (M) f32 += the row sums
  // of op(a), i.e. the column sums of dy with a = mat(dy, true), batch by batch at
  // bias_batch_stride. No bias or activation with it.
  Tensor* bias_grad = nullptr;
};

// ---- elementwise ----
// bias_grad: every backend sums a column in double over chunks of kBiasGradRows rows in row
// order, then the chunks' sums in chunk order (a GPU gives each (chunk, column) a thread: one
// thread per column walking 8192 rows left an H200 idle).
inline constexpr int64_t kBiasGradRows = 64;

enum class GeluKind : uint8_t {
  erf,   // 0.5 x (1 + erf(x / sqrt 2)) — BERT / Hugging Face
  tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) — Megatron's bias_gelu
};

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

// ---- attention ----
// The words of a query row's dropout keep bits that flash_attention_forward saves (ops.def): 32 keys
// a word.
constexpr int64_t flash_keep_words(int64_t S) { return (S + 31) / 32; }

// ---- layernorm ----
// layernorm_backward: every backend sums a column's dy·x̂ and dy in f32 over chunks of
// kLayerNormGradRows rows in row order, and the chunks' sums in double in chunk order.
inline constexpr int64_t kLayerNormGradRows = 32;

// ---- optim_ops: multi-tensor norms and optimizer updates (typed: f32 master weights, gradients
// and state; double sums) ----
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

// One Adam step's constants. The step's own values come from the step's scalars: lr, bc1, bc2
// (rounded to f32) and the gradient factor (clipping folded into the update: the gradients
// count as factor·g; g is only read).
struct AdamStep {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
};
// LARS's constants; the learning rate comes from the step's scalars.
struct LarsStep {
  float momentum = 0.9f, weight_decay = 0, eeta = 0.001f, epsilon = 0;
};

// ==== CNN ops: convolution, batch norm, pooling, ReLU over NHWC activations ====
// Typed ops (a Context and tensor views). Activations are (N, H, W, C) in f32, bf16 or f16
// storage; convolution weights keep PyTorch's (K, C/groups, R, S) in the activations' dtype;
// weight gradients, BN parameters and BN statistics are f32. Arithmetic is f32 (oneDNN
// accumulates convolutions in f32; BN sums in double, as backend/ops.def says).

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

// Max pooling, PyTorch semantics (padding never wins; the first maximum in scan order wins).
struct PoolShape {
  int64_t N = 1, H = 1, W = 1, C = 1;
  int64_t R = 1, S = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t P() const { return (H + 2 * pad_h - R) / stride_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - S) / stride_w + 1; }
};

// Every op of the list; its contract is the comment beside its entry in backend/ops.def.
#define KILN_OP(name, params, args) void name(Context& ctx, KILN_OP_PARAMS params);
#define KILN_OP_DEFAULT(...) = __VA_ARGS__
#include "kiln/backend/ops.def"

}  // namespace kiln::ops
