#include "kiln/nn/tensor_parallel.h"

#include "kiln/core/error.h"

namespace kiln::nn {

int64_t TensorParallel::share(int64_t n, const char* what) const {
  KILN_CHECK(n % size == 0, "tensor parallel: {} {} is not divisible by the tensor-model-parallel size {}",
             what, n, size);
  return n / size;
}

void TensorParallel::all_reduce(Tensor& t) const {
  if (split()) comm->all_reduce_sum(t);
}

}  // namespace kiln::nn
