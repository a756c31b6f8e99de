#include "kiln/nn/embedding.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

Embedding::Embedding(ParamStore& store, const std::string& name, int64_t num, int64_t dim)
    : weight(store.add(name, {num, dim}, true)), num(num), dim(dim) {}

Tensor Embedding::forward(const int32_t* ids, int64_t n) {
  ids_.assign(ids, ids + n);
  Tensor y = y_.get({n, dim});  // (n, dim)
  try {
    ops::gather_rows(weight.w(), num, dim, ids, n, y.ptr<float>());
  } catch (const Error& e) {
    throw Error("{}: {}", weight.spec().name, e.what());
  }
  return y;
}

void Embedding::backward(const Tensor& dy) {
  const int64_t n = int64_t(ids_.size());
  KILN_CHECK(dy.numel() == n * dim, "Embedding {}: gradient {} does not match ({}, {})",
             weight.spec().name, shape_str(dy.shape), n, dim);
  ops::scatter_add_rows(dy.ptr<float>(), ids_.data(), n, dim, weight.g());
}

}  // namespace kiln::nn
