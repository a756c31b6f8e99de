#include "kiln/nn/embedding.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

Embedding::Embedding(ParamStore& store, const std::string& name, int64_t num, int64_t dim)
    : weight(store.add(name, {num, dim}, true)), num(num), dim(dim) {}

Tensor Embedding::forward(const Step& step, const Tensor& ids) {
  KILN_CHECK(ids.dtype == DType::i32 && ids.device.is_cpu(),
             "Embedding {}: ids must be host i32, got {} on {}", weight.spec().name,
             dtype_name(ids.dtype), ids.device.str());
  const int64_t n = ids.numel();
  ids_.assign(ids.ptr<int32_t>(), ids.ptr<int32_t>() + n);
  const Tensor table = weight.compute();
  Tensor y = y_.get({n, dim}, table.dtype);  // (n, dim)
  ops::gather_rows(*step.ctx, table, ids, y);
  return y;
}

void Embedding::backward(const Step& step, const Tensor& dy) {
  const int64_t n = int64_t(ids_.size());
  KILN_CHECK(dy.numel() == n * dim, "Embedding {}: gradient {} does not match ({}, {})",
             weight.spec().name, shape_str(dy.shape), n, dim);
  const Tensor ids = Tensor::view(ids_.data(), {n}, DType::i32);
  Tensor dw = weight.grad();
  ops::scatter_add_rows(*step.ctx, dy.reshape({n, dim}), ids, dw);
}

}  // namespace kiln::nn
