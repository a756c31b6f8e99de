// nn/vocab_parallel_loss.h — the masked-LM loss of nn::MlmLoss over vocab-parallel logits
// (Megatron's vocab_parallel_cross_entropy, spec §3.2): each tensor-parallel rank holds columns
// [start, start + Vs) of the (N, V) logits. The row max, the first argmax and the target's logit
// are combined across the group by an all-gather, the sums of exponentials by an all-reduce;
// backward (softmax - onehot) is local to the shard. Every step runs in ops on the logits' device;
// the host reads back three totals. In parts as nn/losses.h says (stage, forward, read, backward).
#pragma once
#include <cstdint>

#include "kiln/core/context.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/losses.h"
#include "kiln/nn/tensor_parallel.h"

namespace kiln::nn {

class VocabParallelMlmLoss {
 public:
  explicit VocabParallelMlmLoss(const TensorParallel& tp) : tp_(tp) {}
  // ids: (N) whole-vocabulary ids and weights (N), on the host, copied to ctx's device.
  void stage(Context& ctx, const int32_t* ids, const float* weights, int64_t N);
  // logits: (N, Vs) f32 on the context's device, this rank's columns from `start`.
  void forward(const Tensor& logits, int64_t start);
  // The same result on every rank of the group, as MlmLoss of the whole logits.
  LossResult read() const;
  const Tensor& totals() const { return totals_; }
  LossResult forward(Context& ctx, const Tensor& logits, int64_t start, const int32_t* ids,
                     const float* weights);
  // -> dlogits (N, Vs) = dloss * d(loss)/d(logits of this shard), stored in `dtype`.
  Tensor backward(float dloss, DType dtype = DType::f32);

 private:
  TensorParallel tp_;
  Context* ctx_ = nullptr;
  Tensor logits_, labels_, weights_, lse_, totals_;  // labels, weights, lse: (N), kept for backward
  int64_t start_ = 0;
  Buffer labels_buf_, weights_buf_, lse_buf_, totals_buf_, partials_, gathered_, combined_, sumexp_, dlogits_;
};

}  // namespace kiln::nn
