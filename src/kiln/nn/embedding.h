// nn/embedding.h — a lookup table: row ids[i] of weight (num, dim).
#pragma once
#include <string>
#include <vector>

#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/params.h"

namespace kiln::nn {

class Embedding {
 public:
  // Registers `name` (num, dim) with decay (Hugging Face and Megatron decay embeddings).
  Embedding(ParamStore& store, const std::string& name, int64_t num, int64_t dim);

  // ids: (n) i32 in [0, num) (validated by the caller: the data loader or the model's batch
  // check) -> (n, dim) in the compute dtype of the weights. Copies the ids.
  Tensor forward(const Step& step, const Tensor& ids);
  // dy: (n, dim); weight.grad() row ids[i] += dy row i (f32, deterministic order).
  void backward(const Step& step, const Tensor& dy);

  Param weight;
  int64_t num, dim;

 private:
  Tensor ids_;  // (n) i32, a copy of the last forward's ids
  Buffer ids_buf_;
  Buffer y_;
};

}  // namespace kiln::nn
