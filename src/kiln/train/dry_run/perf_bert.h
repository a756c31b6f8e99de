// train/dry_run/perf_bert.h — the BERT step's ops for the performance model (train/dry_run/perf_model.h), in
// the parts kiln runs them: the encoder layers and their attention core (perf_bert_layer.cc), the
// embeddings and heads (perf_bert_ends.cc). perf_model_bert.cc puts a stage together.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/train/dry_run/perf_model.h"
#include "kiln/train/dry_run/perf_ops.h"

namespace kiln::train::perf {

// One micro-batch on one tensor-parallel rank.
struct BertShapes {
  int64_t B = 1, S = 1, N = 1;  // samples, sequence length, rows N = B S
  int64_t H = 1;                // hidden
  int64_t heads = 1, d = 1, w = 1;  // this rank's heads, head size, attention width heads x d = H / tp
  int64_t I = 1;                // this rank's FFN size
  int64_t V = 1;                // this rank's vocabulary rows
  int64_t max_position = 512, type_vocab = 2;
  int64_t M = 1;                // masked rows: B x max_predictions
  int tp = 1;
  DType dtype = DType::f32;
  double e = 4;                 // the compute dtype's bytes
  bool pre_ln = false, hidden_dropout = true, attention_dropout = true, recompute = false, binary_head = true;
  // The share of calls whose weight gradient adds to one written earlier in the step (every
  // micro-batch but the first): (m - 1) / m.
  double dw_accumulate = 0;
  Math math() const { return matmul_math(dtype); }
  int64_t Z() const { return B * heads * S * S; }  // elements of one (B, heads, S, S) tensor
};

// f32 operations per element of the row ops (the roofline's compute side; they are bandwidth-bound
// at every dtype): erf / tanh GELU, LayerNorm forward and backward, softmax forward and backward,
// softmax cross-entropy forward and backward per logit.
inline constexpr double kGeluFlops = 20, kLnForwardFlops = 8, kLnBackwardFlops = 12, kSoftmaxFlops = 5,
                        kSoftmaxBackwardFlops = 4, kXentFlops = 4, kXentBackwardFlops = 3;

using Ops = std::vector<OpCost>;

// A Linear (nn/linear.h) of rows x in -> out: the product with its bias in the epilogue (row-parallel
// under TP: all-reduce, then bias_add); backward's dW (f32), bias gradient and dX (+= when
// `dx_accumulate`; column-parallel under TP with `reduce`: a partial dX, its all-reduce, and the
// add or copy into dX).
void linear_forward(const BertShapes& s, Ops& ops, const std::string& name, double calls, int64_t rows, int64_t in,
                    int64_t out, bool row_parallel = false);
void linear_backward(const BertShapes& s, Ops& ops, const std::string& name, double calls, int64_t rows, int64_t in,
                     int64_t out, bool dx_accumulate, bool reduce = false);
// Elementwise over n elements of the compute dtype: `tensors` read or written.
OpCost elementwise(const BertShapes& s, std::string name, double calls, std::string shape, double n, int tensors,
                   double flops_per_element = 1);
// LayerNorm over `rows` x H (nn/layernorm.h): forward (with the residual join when `join`) and
// backward (+= into dX when `accumulate`).
OpCost layernorm_forward(const BertShapes& s, std::string name, double calls, int64_t rows, bool join);
OpCost layernorm_backward(const BertShapes& s, std::string name, double calls, int64_t rows, bool accumulate);
OpCost gelu_forward(const BertShapes& s, std::string name, double calls, int64_t rows, int64_t cols);
OpCost gelu_backward(const BertShapes& s, std::string name, double calls, int64_t rows, int64_t cols);

// The encoder layers, `calls` = layers x micro-batches (nn/transformer.cc).
void layer_forward(const BertShapes& s, Ops& ops, double calls);
void layer_backward(const BertShapes& s, Ops& ops, double calls);
// The fused attention core in place of the unfused core's rows: forward, backward and backward's
// recomputation.
Ops fused_attention(const BertShapes& s, double calls);

// The first stage's embeddings and the last stage's heads and losses, `calls` = micro-batches
// (models/bert_stage.cc). `tied_grad_written`: the word embedding's gradient is written by the
// decoder (the whole model on one stage), else it is zero-filled once a step.
void embeddings(const BertShapes& s, Ops& ops, double calls, bool tied_grad_written);
void heads(const BertShapes& s, Ops& ops, double calls);

}  // namespace kiln::train::perf
