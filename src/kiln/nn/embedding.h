// nn/embedding.h — a lookup table: row ids[i] of weight (num, dim).
// Vocab-parallel (Megatron's VocabParallelEmbedding): rank r holds rows [r*num/TP, ...); ids
// outside them give zero rows, and the output is all-reduced over the group.
#pragma once
#include <string>

#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/params.h"
#include "kiln/nn/tensor_parallel.h"

namespace kiln::nn {

class Embedding {
 public:
  // Registers `name` (num, dim) with decay (Hugging Face and Megatron decay embeddings).
  Embedding(ParamStore& store, const std::string& name, int64_t num, int64_t dim);
  // This rank's rows of a vocab-parallel table of `num` rows.
  Embedding(ParamStore& store, const std::string& name, int64_t num, int64_t dim,
            const TensorParallel& tp);

  // ids: (n) i32 in [0, num) (validated by the caller: the data loader or the model's batch
  // check) -> (n, dim) in the compute dtype of the weights. Copies the ids.
  Tensor forward(const Step& step, const Tensor& ids);
  // dy: (n, dim); weight.grad() row ids[i] += dy row i (f32, deterministic order).
  void backward(const Step& step, const Tensor& dy);

  Param weight;
  int64_t num, dim;  // this rank's rows
  int64_t start = 0;  // the first of them

 private:
  TensorParallel tp_;
  Tensor ids_;  // (n) i32, a copy of the last forward's ids
  Buffer ids_buf_;
  Buffer y_;
};

}  // namespace kiln::nn
