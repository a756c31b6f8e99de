// The performance model's BERT embeddings and heads (train/dry_run/perf_bert.h), as models/bert_stage.cc
// runs them. Scatter-adds are counted at their bound: dy read once, each gradient row they touch
// read and written once (the word rows as if every token were distinct).
#include <algorithm>

#include "kiln/train/dry_run/perf_bert.h"

namespace kiln::train::perf {
namespace {

// (rows, H) gathered by `rows` ids (i32) into `out_bytes` per element. nn::Embedding copies its
// ids first (read and written once more).
OpCost gather(const BertShapes& s, std::string name, double calls, int64_t rows, double out_bytes,
              bool copies_ids = false) {
  const double n = double(rows * s.H);
  return perf::rows(std::move(name), OpClass::embedding, calls, dims({rows, s.H}, s.dtype), 0,
                    double(rows) * (copies_ids ? 12 : 4) + n * (s.e + out_bytes));
}

// table rows ids[i] += dy row i: the ids sorted by row, dy (rows, H) and the ids read, `touched`
// rows of the table (`table_bytes` per element: an f32 gradient, or a compute-dtype one) read and
// written, and `filled` rows zeroed first (a gradient not yet written this step).
OpCost scatter_add(const BertShapes& s, std::string name, double calls, int64_t rows, int64_t touched,
                   double filled, double table_bytes) {
  const double H = double(s.H);
  return perf::rows(std::move(name), OpClass::embedding, calls, dims({rows, s.H}, s.dtype) + " rows", double(rows) * H,
                    double(rows) * (H * s.e + 4) + scatter_sort_bytes(rows) +
                        (2 * double(touched) + filled) * H * table_bytes);
}

}  // namespace

void embeddings(const BertShapes& s, Ops& ops, double calls, bool tied_grad_written) {
  const int64_t N = s.N, H = s.H;
  const double n = double(N * H), word_bytes = s.tp > 1 ? 4 : s.e;  // TP: f32 rows, all-reduced
  ops.push_back(gather(s, "embeddings.word.forward", calls, N, word_bytes, true));
  if (s.tp > 1)
    ops.push_back(collective("embeddings.word.all_reduce", OpClass::exchange, calls, dims({N, H}, DType::f32), n * 4,
                             s.tp, kAllReduce));
  ops.push_back(gather(s, "embeddings.position.forward", calls, N, s.e, true));
  ops.push_back(gather(s, "embeddings.token_type.forward", calls, N, s.e, true));
  OpCost add = elementwise(s, "embeddings.add_position", calls, dims({N, H}, s.dtype), n, 2);
  add.bytes += n * word_bytes;
  ops.push_back(add);
  ops.push_back(elementwise(s, "embeddings.add_token_type", calls, dims({N, H}, s.dtype), n, 3));
  if (!s.pre_ln) ops.push_back(layernorm_forward(s, "embeddings.norm.forward", calls, N, false));
  if (s.hidden_dropout) ops.push_back(elementwise(s, "embeddings.dropout.forward", calls, dims({N, H}, s.dtype), n, 2));

  if (s.hidden_dropout) ops.push_back(elementwise(s, "embeddings.dropout.backward", calls, dims({N, H}, s.dtype), n, 2));
  if (!s.pre_ln) ops.push_back(layernorm_backward(s, "embeddings.norm.backward", calls, N, false));
  // Zero fills happen on a step's first micro-batch: spread over the calls.
  const double once = 1.0 / calls;
  ops.push_back(scatter_add(s, "embeddings.word.backward", calls, N, std::min(N, s.V),
                            tied_grad_written ? 0 : once * double(s.V), 4));
  ops.push_back(scatter_add(s, "embeddings.position.backward", calls, N, std::min(s.S, s.max_position),
                            once * double(s.max_position), 4));
  ops.push_back(scatter_add(s, "embeddings.token_type.backward", calls, N, s.type_vocab, once * double(s.type_vocab), 4));
}

namespace {

// Pooler tanh(dense(h[:, 0])) -> seq_relationship (B, 2) -> NSP loss, and back.
void binary_head(const BertShapes& s, Ops& ops, double calls, bool forward) {
  const int64_t B = s.B, H = s.H;
  const double tanh = double(B * H);
  if (forward) {
    ops.push_back(gather(s, "heads.first_tokens", calls, B, s.e));
    linear_forward(s, ops, "heads.pooler", calls, B, H, H);
    ops.push_back(elementwise(s, "heads.pooler_tanh.forward", calls, dims({B, H}, s.dtype), tanh, 2, kGeluFlops));
    linear_forward(s, ops, "heads.seq_relationship", calls, B, H, 2);
    ops.push_back(rows("heads.nsp_loss.forward", OpClass::loss, calls, dims({B, 2}, DType::f32), double(B * 2) * kXentFlops,
                       double(B * 2) * (s.e + 8) + double(B) * 12));
    return;
  }
  ops.push_back(rows("heads.nsp_loss.backward", OpClass::loss, calls, dims({B, 2}, s.dtype),
                     double(B * 2) * kXentBackwardFlops, double(B * 2) * (4 + s.e) + double(B) * 12));
  linear_backward(s, ops, "heads.seq_relationship", calls, B, H, 2, false);
  ops.push_back(elementwise(s, "heads.pooler_tanh.backward", calls, dims({B, H}, s.dtype), tanh, 3, 3));
  linear_backward(s, ops, "heads.pooler", calls, B, H, H, false);
  ops.push_back(scatter_add(s, "heads.first_tokens.backward", calls, B, B, 0, s.e));  // into the sequence gradient
}

// logits (M, V) f32 = t (M, H) x Wword^T + bias (f32); the vocab-parallel loss reads them twice.
void mlm_forward(const BertShapes& s, Ops& ops, double calls) {
  const int64_t M = s.M, V = s.V;
  ops.push_back(gemm("heads.decoder.forward", OpClass::gemm, calls,
                     {.M = M, .N = V, .K = s.H, .ea = s.e, .eb = s.e, .ec = 4, .bias = V, .ebias = 4, .math = s.math()}));
  const double logits = double(M * V), reads = s.tp > 1 ? 2 : 1;
  ops.push_back(rows("heads.mlm_loss.forward", OpClass::loss, calls, dims({M, V}, DType::f32), logits * kXentFlops,
                     logits * 4 * reads + double(M) * 12));
}

// dlogits (M, V) in the compute dtype = softmax - targets; decoder bias, weight and input gradients.
void mlm_backward(const BertShapes& s, Ops& ops, double calls) {
  const int64_t M = s.M, V = s.V, H = s.H;
  const double logits = double(M * V);
  ops.push_back(rows("heads.mlm_loss.backward", OpClass::loss, calls, dims({M, V}, s.dtype),
                     logits * kXentBackwardFlops, logits * (4 + s.e) + double(M) * 12));
  ops.push_back(bias_grad_epilogue("heads.decoder.bias_grad", calls, dims({M, V}, s.dtype), M, V));
  ops.push_back(gemm("heads.decoder.backward_weights", OpClass::gemm, calls,
                     {.M = V, .N = H, .K = M, .ea = s.e, .eb = s.e, .ec = 4, .accumulate = s.dw_accumulate,
                      .math = s.math()}));
  ops.push_back(gemm("heads.decoder.backward_data", OpClass::gemm, calls,
                     {.M = M, .N = H, .K = V, .ea = s.e, .eb = s.e, .ec = s.e, .math = s.math()}));
  if (s.tp > 1)
    ops.push_back(collective("heads.decoder.dx_all_reduce", OpClass::exchange, calls, dims({M, H}, s.dtype),
                             double(M * H) * s.e, s.tp, kAllReduce));
}

}  // namespace

void heads(const BertShapes& s, Ops& ops, double calls) {
  const int64_t M = s.M, H = s.H, N = s.N;
  if (s.pre_ln) ops.push_back(layernorm_forward(s, "heads.final_norm.forward", calls, N, false));
  if (s.binary_head) binary_head(s, ops, calls, true);
  ops.push_back(gather(s, "heads.masked_rows", calls, M, s.e));
  linear_forward(s, ops, "heads.transform", calls, M, H, H);
  ops.push_back(gelu_forward(s, "heads.transform_gelu.forward", calls, M, H));
  ops.push_back(layernorm_forward(s, "heads.transform_norm.forward", calls, M, false));
  mlm_forward(s, ops, calls);

  mlm_backward(s, ops, calls);
  ops.push_back(layernorm_backward(s, "heads.transform_norm.backward", calls, M, false));
  ops.push_back(gelu_backward(s, "heads.transform_gelu.backward", calls, M, H));
  linear_backward(s, ops, "heads.transform", calls, M, H, H, false);
  ops.push_back(elementwise(s, "heads.sequence_grad_fill", calls, dims({N, H}, s.dtype), double(N * H), 1, 0));
  ops.push_back(scatter_add(s, "heads.masked_rows.backward", calls, M, M, 0, s.e));
  if (s.binary_head) binary_head(s, ops, calls, false);
  if (s.pre_ln) ops.push_back(layernorm_backward(s, "heads.final_norm.backward", calls, N, false));
}

}  // namespace kiln::train::perf
