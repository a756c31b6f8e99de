// nn/losses.h — BERT pretraining losses; log-softmax in fp32, sums in double.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

struct LossResult {
  double loss = 0;      // the value backward differentiates
  int64_t correct = 0;  // argmax == label among counted rows
  double count = 0;     // MLM: sum of weights; NSP: number of non-ignored rows
};

// Masked-LM loss over N masked slots: loss = -sum_i w_i log_softmax(logits_i)[id_i] /
// (sum_i w_i + 1e-5). correct counts rows with w_i > 0 and argmax == id_i.
class MlmLoss {
 public:
  // logits: (N, V), ids: (N) in [0, V) (throws kiln::Error otherwise), weights: (N).
  // Keeps a handle to logits and copies ids and weights.
  LossResult forward(const Tensor& logits, const int32_t* ids, const float* weights);
  // -> dlogits (N, V) = dloss * d(loss)/d(logits).
  Tensor backward(float dloss);

 private:
  Tensor logits_;
  std::vector<int32_t> ids_;
  std::vector<float> coef_;
  Buffer lse_, argmax_, dlogits_;
};

// Next-sentence loss: mean softmax cross-entropy over rows whose label != -1 (0 if none).
class NspLoss {
 public:
  // logits: (B, C), labels: (B) in [0, C) or -1 (throws kiln::Error otherwise).
  LossResult forward(const Tensor& logits, const int32_t* labels);
  // -> dlogits (B, C) = dloss * d(loss)/d(logits); ignored rows get 0.
  Tensor backward(float dloss);

 private:
  Tensor logits_;
  std::vector<int32_t> labels_;
  std::vector<float> coef_;
  Buffer lse_, argmax_, dlogits_;
};

}  // namespace kiln::nn
