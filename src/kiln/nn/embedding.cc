#include "kiln/nn/embedding.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

Embedding::Embedding(ParamStore& store, const std::string& name, int64_t num, int64_t dim)
    : weight(store.add(name, {num, dim}, true)), num(num), dim(dim) {}

Embedding::Embedding(ParamStore& store, const std::string& name, int64_t num, int64_t dim,
                     const TensorParallel& tp)
    : num(tp.share(num, (name + " rows").c_str())), dim(dim), start(tp.start(num)), tp_(tp) {
  weight = store.add_part(name, {num, dim}, true, 0, start, this->num);
}

Tensor Embedding::forward(const Step& step, const Tensor& ids) {
  KILN_CHECK(ids.dtype == DType::i32, "Embedding {}: ids must be i32, got {}", weight.spec().name,
             dtype_name(ids.dtype));
  const int64_t n = ids.numel();
  ids_ = ids_buf_.get(*step.ctx, {n}, DType::i32);  // kept for backward: the caller's ids may change
  ops::copy(*step.ctx, ids.reshape({n}), ids_);
  if (tp_.split()) {  // this rank's rows, zero rows for the other ids, then the sum over ranks (exact)
    Tensor y = y_.get(*step.ctx, {n, dim}, DType::f32);
    ops::gather_rows(*step.ctx, weight.compute(), ids_, y, start);
    tp_.all_reduce(y);
    return y;
  }
  const Tensor table = weight.compute();
  Tensor y = y_.get(*step.ctx, {n, dim}, table.dtype);  // (n, dim)
  ops::gather_rows(*step.ctx, table, ids_, y);
  return y;
}

void Embedding::backward(const Step& step, const Tensor& dy) {
  const int64_t n = ids_.numel();
  KILN_CHECK(dy.numel() == n * dim, "Embedding {}: gradient {} does not match ({}, {})",
             weight.spec().name, shape_str(dy.shape), n, dim);
  Tensor dw = weight.grad();
  ops::scatter_add_rows(*step.ctx, dy.reshape({n, dim}), ids_, dw, start);  // a part: its own rows only
}

}  // namespace kiln::nn
