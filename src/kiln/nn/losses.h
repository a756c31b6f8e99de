// nn/losses.h — BERT pretraining losses over f32 logits: ops::softmax_xent_forward/backward
// (log-softmax in fp32, sums in double). A loss runs in three parts so that a graph can hold the
// middle one: stage (the labels and weights copied to the device), forward and backward (ops
// only; the backward's divisor is read from the forward's totals on the device), and read (three
// numbers back to the host). forward(logits, labels, ..., ctx) does the first three at once.
#pragma once
#include <cstdint>

#include "kiln/backend/xent_norm.h"
#include "kiln/core/context.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

struct LossResult {
  double loss = 0;      // the value backward differentiates
  int64_t correct = 0;  // argmax == label among counted rows
  double count = 0;     // MLM: sum of weights; NSP: number of non-ignored rows
};

// A softmax cross-entropy divided by norm.divisor(totals): what it keeps between its parts is
// the labels and weights on the device, the logits handle, the saved log-sum-exp and the totals.
class SoftmaxXentState {
 public:
  explicit SoftmaxXentState(ops::XentNorm norm) : norm_(norm) {}
  // labels (N) i32, negative = ignored; weights (N) or null (1 per row); copied to ctx's device.
  void stage(Context& ctx, const int32_t* labels, const float* weights, int64_t N);
  // logits (N, V) of the staged rows; the totals stay on the device.
  void forward(const Tensor& logits, float label_smoothing);
  // stage, forward and read at once.
  LossResult forward(Context& ctx, const Tensor& logits, const int32_t* labels, const float* weights,
                     float label_smoothing);
  // The last forward's loss (Σ / divisor), hits and weight sum, read back.
  LossResult read() const;
  // The same from totals (3) that a copy of totals() holds.
  LossResult read(const Tensor& totals) const;
  // The last forward's totals (3) on the device (f64 in i64), until the next forward.
  const Tensor& totals() const { return totals_; }
  // dlogits (N, V) in `dtype` = c_i · (softmax - target) (ops::xent_row_factor), computed in f32.
  Tensor backward(float scale, DType dtype = DType::f32);

 private:
  ops::XentNorm norm_;
  Context* ctx_ = nullptr;
  float label_smoothing_ = 0;
  Tensor logits_, labels_, weights_, lse_, totals_;
  Buffer labels_buf_, weights_buf_, lse_buf_, totals_buf_, dlogits_buf_;
};

// Totals (3) of a cross-entropy op on the host as a LossResult, the loss divided by norm's divisor.
LossResult xent_result(const double* totals, ops::XentNorm norm);
// The same from totals (3) on ctx's device (f64 in i64), read back.
LossResult read_xent_totals(Context& ctx, const Tensor& totals, ops::XentNorm norm);

// Masked-LM loss over N masked slots: loss = -sum_i w_i log_softmax(logits_i)[id_i] /
// (sum_i w_i + 1e-5). correct counts rows with w_i > 0 and argmax == id_i.
class MlmLoss {
 public:
  static constexpr ops::XentNorm kNorm{1e-5, 0.0};
  // ids: (N) in [0, V) (loaders validate them; one >= V throws kiln::Error), weights: (N).
  void stage(Context& ctx, const int32_t* ids, const float* weights, int64_t N) {
    xent_.stage(ctx, ids, weights, N);
  }
  // logits: (N, V) f32; keeps a handle to them.
  void forward(const Tensor& logits) { xent_.forward(logits, 0.0f); }
  LossResult read() const { return xent_.read(); }
  const Tensor& totals() const { return xent_.totals(); }
  LossResult forward(const Tensor& logits, const int32_t* ids, const float* weights,
                     Context& ctx = cpu_context()) {
    return xent_.forward(ctx, logits, ids, weights, 0.0f);
  }
  // -> dlogits (N, V) = dloss * d(loss)/d(logits), stored in `dtype`.
  Tensor backward(float dloss, DType dtype = DType::f32) { return xent_.backward(dloss, dtype); }

 private:
  SoftmaxXentState xent_{kNorm};
};

// Next-sentence loss: mean softmax cross-entropy over rows whose label is not negative (0 if
// none).
class NspLoss {
 public:
  static constexpr ops::XentNorm kNorm{0.0, 1.0};
  // labels: (B) in [0, C) or -1 (one >= C throws kiln::Error).
  void stage(Context& ctx, const int32_t* labels, int64_t B) { xent_.stage(ctx, labels, nullptr, B); }
  // logits: (B, C) f32.
  void forward(const Tensor& logits) { xent_.forward(logits, 0.0f); }
  LossResult read() const { return xent_.read(); }
  const Tensor& totals() const { return xent_.totals(); }
  LossResult forward(const Tensor& logits, const int32_t* labels, Context& ctx = cpu_context()) {
    return xent_.forward(ctx, logits, labels, nullptr, 0.0f);
  }
  // -> dlogits (B, C) = dloss * d(loss)/d(logits), stored in `dtype`; ignored rows get 0.
  Tensor backward(float dloss, DType dtype = DType::f32) { return xent_.backward(dloss, dtype); }

 private:
  SoftmaxXentState xent_{kNorm};
};

}  // namespace kiln::nn
