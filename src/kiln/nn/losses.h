// nn/losses.h — BERT pretraining losses over f32 logits: ops::softmax_xent_forward/backward
// (log-softmax in fp32, sums in double), the layer reads back three numbers per forward.
#pragma once
#include <cstdint>

#include "kiln/core/context.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

struct LossResult {
  double loss = 0;      // the value backward differentiates
  int64_t correct = 0;  // argmax == label among counted rows
  double count = 0;     // MLM: sum of weights; NSP: number of non-ignored rows
};

// What a softmax cross-entropy keeps between forward and backward: labels and weights copied
// to the device, the logits handle and the saved log-sum-exp.
class SoftmaxXentState {
 public:
  struct Totals {
    double loss_sum = 0, weight_sum = 0;
    int64_t correct = 0;
  };
  // logits (N, V); labels (N) i32, negative = ignored; weights (N) or null (1 per row).
  Totals forward(Context& ctx, const Tensor& logits, const int32_t* labels, const float* weights,
                 float label_smoothing);
  // dlogits (N, V) f32 = scale · f32(w_i / norm) · (softmax - target) per row.
  Tensor backward(float scale, double norm);
  // The totals (3) that a cross-entropy op left on ctx's device (f64 in i64), read back.
  static Totals read_totals(Context& ctx, const Tensor& totals);

 private:
  Context* ctx_ = nullptr;
  float label_smoothing_ = 0;
  Tensor logits_, labels_, weights_, lse_;
  Buffer labels_buf_, weights_buf_, lse_buf_, totals_buf_, dlogits_buf_;
};

// Masked-LM loss over N masked slots: loss = -sum_i w_i log_softmax(logits_i)[id_i] /
// (sum_i w_i + 1e-5). correct counts rows with w_i > 0 and argmax == id_i.
class MlmLoss {
 public:
  // logits: (N, V) f32, ids: (N) in [0, V) (loaders validate them; one >= V throws
  // kiln::Error), weights: (N). Keeps a handle to logits and copies ids and weights.
  LossResult forward(const Tensor& logits, const int32_t* ids, const float* weights,
                     Context& ctx = cpu_context());
  // -> dlogits (N, V) = dloss * d(loss)/d(logits).
  Tensor backward(float dloss);

 private:
  SoftmaxXentState xent_;
  double denom_ = 1;
};

// Next-sentence loss: mean softmax cross-entropy over rows whose label is not negative (0 if
// none).
class NspLoss {
 public:
  // logits: (B, C) f32, labels: (B) in [0, C) or -1 (one >= C throws kiln::Error).
  LossResult forward(const Tensor& logits, const int32_t* labels, Context& ctx = cpu_context());
  // -> dlogits (B, C) = dloss * d(loss)/d(logits); ignored rows get 0.
  Tensor backward(float dloss);

 private:
  SoftmaxXentState xent_;
  double count_ = 0;
};

}  // namespace kiln::nn
