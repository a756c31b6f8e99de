// nn/embedding.h — a lookup table: row ids[i] of weight (num, dim).
#pragma once
#include <string>
#include <vector>

#include "kiln/nn/params.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

class Embedding {
 public:
  // Registers `name` (num, dim) with decay (Hugging Face and Megatron decay embeddings).
  Embedding(ParamStore& store, const std::string& name, int64_t num, int64_t dim);

  // ids: (n) -> (n, dim). Throws kiln::Error for an id outside [0, num). Copies the ids.
  Tensor forward(const int32_t* ids, int64_t n);
  // dy: (n, dim); weight.g() row ids[i] += dy row i (deterministic order).
  void backward(const Tensor& dy);

  Param weight;
  int64_t num, dim;

 private:
  std::vector<int32_t> ids_;
  Buffer y_;
};

}  // namespace kiln::nn
