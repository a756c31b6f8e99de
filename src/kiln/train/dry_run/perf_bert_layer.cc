// The performance model's encoder layer (train/dry_run/perf_bert.h), op for op as nn/transformer.cc and
// nn/attention.cc run it. Q, K and V's forward is one batched product that reads x for each of
// them (counted as three), as are their weight gradients; their input gradients three products
// summed into dx. Where kiln's CUDA backend does more than this counts: the row kernels make
// several passes where the model counts one (softmax and LayerNorm statistics through scratch),
// and the unfused core keeps S x S scores and probabilities in HBM, which the fused core's rows
// (fused_attention) do not.
#include "kiln/train/dry_run/perf_bert.h"

#include "kiln/backend/backend.h"

namespace kiln::train::perf {
namespace {

// Per-head products over (B, heads, S, S) matrices and (S, d) views of (N, w) tensors.
Gemm core_gemm(const BertShapes& s, int64_t M, int64_t N, int64_t K, double ec) {
  return {.batch = s.B * s.heads, .M = M, .N = N, .K = K, .ea = s.e, .eb = s.e, .ec = ec, .math = s.math()};
}

std::string z_shape(const BertShapes& s, DType t) { return dims({s.B, s.heads, s.S, s.S}, t); }

// scores (B, heads, S, S) f32 = q k^T / sqrt(d); probs = softmax(scores + mask) in the compute dtype
// (f32: in the scores' buffer), and with dropout the dropped probabilities in one pass.
void core_forward(const BertShapes& s, Ops& ops, double calls, const std::string& prefix, bool with_dropped) {
  const double Z = double(s.Z()), mask = double(s.B * s.S) * 4;
  OpCost scores = gemm(prefix + ".scores", OpClass::attention, calls, core_gemm(s, s.S, s.S, s.d, 4));
  scores.model_flops = prefix == "layer.attention";  // a recomputation is not model work
  ops.push_back(scores);
  if (s.attention_dropout && with_dropped)
    ops.push_back(rows(prefix + ".probs_dropout", OpClass::attention, calls, z_shape(s, DType::f32),
                       Z * (kSoftmaxFlops + 1), Z * 4 + mask + 2 * Z * s.e));
  else
    ops.push_back(rows(prefix + ".softmax", OpClass::attention, calls, z_shape(s, DType::f32), Z * kSoftmaxFlops,
                       Z * 4 + mask + Z * s.e));
}

void attention_forward(const BertShapes& s, Ops& ops, double calls) {
  for (const char* p : {"query", "key", "value"})
    linear_forward(s, ops, std::string("layer.attention.") + p, calls, s.N, s.H, s.w);
  core_forward(s, ops, calls, "layer.attention", true);
  // context (N, w) = dropped probs (S, S) x v (S, d), head by head.
  ops.push_back(gemm("layer.attention.context", OpClass::attention, calls, core_gemm(s, s.S, s.d, s.S, s.e)));
}

void attention_backward(const BertShapes& s, Ops& ops, double calls, bool dx_accumulate) {
  const double Z = double(s.Z());
  if (s.recompute) core_forward(s, ops, calls, "layer.attention.recompute", false);
  // dprobs (B, heads, S, S) f32 = dctx v^T.
  ops.push_back(gemm("layer.attention.dprobs", OpClass::attention, calls, core_gemm(s, s.S, s.S, s.d, 4)));
  // dscores = softmax'(dropout'(dprobs)) / sqrt(d), remaking the dropped probabilities for dv.
  if (s.attention_dropout)
    ops.push_back(rows("layer.attention.probs_backward", OpClass::attention, calls, z_shape(s, s.dtype),
                       Z * (kSoftmaxBackwardFlops + 1), Z * 4 + 3 * Z * s.e));
  else
    ops.push_back(rows("layer.attention.softmax_backward", OpClass::attention, calls, z_shape(s, s.dtype),
                       Z * kSoftmaxBackwardFlops, Z * 4 + 2 * Z * s.e));
  // dv = dropped^T dctx, dq = dscores k, dk = dscores^T q: (S, S) x (S, d) per head.
  for (const char* p : {"dv", "dq", "dk"})
    ops.push_back(gemm(std::string("layer.attention.") + p, OpClass::attention, calls, core_gemm(s, s.S, s.d, s.S, s.e)));
  // q, k, v backward into dx; under TP into one partial (N, H), all-reduced once and added / copied.
  const bool partial = s.tp > 1;
  linear_backward(s, ops, "layer.attention.query", calls, s.N, s.H, s.w, dx_accumulate && !partial);
  linear_backward(s, ops, "layer.attention.key", calls, s.N, s.H, s.w, true);
  linear_backward(s, ops, "layer.attention.value", calls, s.N, s.H, s.w, true);
  if (!partial) return;
  const double n = double(s.N * s.H);
  ops.push_back(collective("layer.attention.dx_all_reduce", OpClass::exchange, calls, dims({s.N, s.H}, s.dtype),
                           n * s.e, s.tp, kAllReduce));
  ops.push_back(elementwise(s, dx_accumulate ? "layer.attention.dx_add" : "layer.attention.dx_copy", calls,
                            dims({s.N, s.H}, s.dtype), n, dx_accumulate ? 3 : 2));
}

OpCost dropout(const BertShapes& s, std::string name, double calls) {
  return elementwise(s, std::move(name), calls, dims({s.N, s.H}, s.dtype), double(s.N * s.H), 2);
}

}  // namespace

void layer_forward(const BertShapes& s, Ops& ops, double calls) {
  const int64_t N = s.N, H = s.H;
  if (s.pre_ln) ops.push_back(layernorm_forward(s, "layer.attention_norm.forward", calls, N, false));
  attention_forward(s, ops, calls);
  linear_forward(s, ops, "layer.attention_output", calls, N, s.w, H, true);
  if (s.hidden_dropout) ops.push_back(dropout(s, "layer.attention_dropout.forward", calls));
  // Post-LN: a = LN(x + o); pre-LN: LN_out(x + o) before the MLP, the join kept.
  ops.push_back(layernorm_forward(s, s.pre_ln ? "layer.output_norm.forward" : "layer.attention_norm.forward", calls,
                                  N, true));
  linear_forward(s, ops, "layer.intermediate", calls, N, H, s.I);
  ops.push_back(gelu_forward(s, "layer.gelu.forward", calls, N, s.I));
  linear_forward(s, ops, "layer.output", calls, N, s.I, H, true);
  if (s.hidden_dropout) ops.push_back(dropout(s, "layer.output_dropout.forward", calls));
  if (s.pre_ln)
    ops.push_back(elementwise(s, "layer.residual_add", calls, dims({N, H}, s.dtype), double(N * H), 3));
  else
    ops.push_back(layernorm_forward(s, "layer.output_norm.forward", calls, N, true));
}

// The residual adds are folded into the LayerNorm backward and the matmuls (+= into dX).
void layer_backward(const BertShapes& s, Ops& ops, double calls) {
  const int64_t N = s.N, H = s.H;
  if (!s.pre_ln) ops.push_back(layernorm_backward(s, "layer.output_norm.backward", calls, N, false));
  if (s.hidden_dropout) ops.push_back(dropout(s, "layer.output_dropout.backward", calls));
  linear_backward(s, ops, "layer.output", calls, N, s.I, H, false);
  ops.push_back(gelu_backward(s, "layer.gelu.backward", calls, N, s.I));
  // Post-LN: += into the residual gradient; pre-LN: into dl2, then da = dy + LN_out'(dl2).
  linear_backward(s, ops, "layer.intermediate", calls, N, H, s.I, !s.pre_ln, true);
  if (s.pre_ln) {
    ops.push_back(elementwise(s, "layer.residual_grad_copy", calls, dims({N, H}, s.dtype), double(N * H), 2, 0));
    ops.push_back(layernorm_backward(s, "layer.output_norm.backward", calls, N, true));
  } else {
    ops.push_back(layernorm_backward(s, "layer.attention_norm.backward", calls, N, false));
  }
  if (s.hidden_dropout) ops.push_back(dropout(s, "layer.attention_dropout.backward", calls));
  linear_backward(s, ops, "layer.attention_output", calls, N, s.w, H, false);
  attention_backward(s, ops, calls, !s.pre_ln);
  if (s.pre_ln) ops.push_back(layernorm_backward(s, "layer.attention_norm.backward", calls, N, true));
}

// kiln's fused core (backend/cuda/attention_forward.h, attention_backward.h): forward reads q, k, v
// and writes the context, the rows' lse and, with dropout, its keep bits (a bit an element; 4 d Z
// FLOPs); backward runs a key pass (dk, dv: the scores, dp, dv, dk) and a query pass (dq: the
// scores and dp again, dq), each reading q, k, v, the context, dO, the lse, the keep bits and the
// mask, and writes dq, dk, dv: 8 d Z FLOPs of products, plus 6 d Z recomputed (the scores twice, dp
// once more), which are not model work. Nothing of size S x S in HBM but the bits. The bytes are
// each tensor once a pass (re-reads of a block's rows by other blocks hit in L2).
Ops fused_attention(const BertShapes& s, double calls) {
  const double Z = double(s.Z()), d = double(s.d), qkv = double(s.N * s.w) * s.e,
               stats = double(s.B * s.heads * s.S) * 4, mask = double(s.B * s.S) * 4,
               bits = s.attention_dropout ? double(s.B * s.heads * s.S * ops::flash_keep_words(s.S)) * 4 : 0.0;
  OpCost fwd = rows("layer.attention.fused_forward", OpClass::attention, calls, dims({s.N, s.w}, s.dtype) + " x 4",
                    4 * Z * d, 4 * qkv + stats + mask + bits);
  OpCost bwd = rows("layer.attention.fused_backward", OpClass::attention, calls, dims({s.N, s.w}, s.dtype) + " x 8",
                    8 * Z * d, 13 * qkv + 2 * stats + 2 * mask + 2 * bits);
  OpCost again = rows("layer.attention.fused_backward.recompute", OpClass::attention, calls,
                      dims({s.B, s.heads, s.S, s.S}, DType::f32) + " in SRAM", 6 * Z * d, 0);
  fwd.math = bwd.math = again.math = s.math();
  fwd.model_flops = bwd.model_flops = true;
  return {fwd, bwd, again};
}

}  // namespace kiln::train::perf
