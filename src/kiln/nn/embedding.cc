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

namespace {

Tensor ids_tensor(std::vector<int32_t>& v) {
  return Tensor::view(v.data(), {int64_t(v.size())}, DType::i32);
}

}  // namespace

Tensor Embedding::forward(const Step& step, const Tensor& ids) {
  KILN_CHECK(ids.dtype == DType::i32, "Embedding {}: ids must be i32, got {}", weight.spec().name,
             dtype_name(ids.dtype));
  const int64_t n = ids.numel();
  if (tp_.split()) {
    // y = 0, then the rows this rank holds added in place (exact), then the sum over ranks.
    positions_.clear();
    local_ids_.clear();
    for (int64_t i = 0; i < n; ++i)
      if (const int64_t id = ids.ptr<int32_t>()[i] - start; id >= 0 && id < num) {
        positions_.push_back(int32_t(i));
        local_ids_.push_back(int32_t(id));
      }
    Tensor y = y_.get(*step.ctx, {n, dim}, DType::f32);
    ops::fill(*step.ctx, y, 0.0f);
    if (positions_.empty()) return tp_.all_reduce(y), y;
    Tensor rows = rows_.get(*step.ctx, {int64_t(positions_.size()), dim}, DType::f32);
    ops::gather_rows(*step.ctx, weight.value(), ids_tensor(local_ids_), rows);
    ops::scatter_add_rows(*step.ctx, rows, ids_tensor(positions_), y);
    tp_.all_reduce(y);
    return y;
  }
  ids_ = ids_buf_.get(*step.ctx, {n}, DType::i32);  // kept for backward: the caller's ids may change
  ops::copy(*step.ctx, ids.reshape({n}), ids_);
  const Tensor table = weight.compute();
  Tensor y = y_.get(*step.ctx, {n, dim}, table.dtype);  // (n, dim)
  ops::gather_rows(*step.ctx, table, ids, y);
  return y;
}

void Embedding::backward(const Step& step, const Tensor& dy) {
  if (tp_.split()) {  // the rows of the ids this rank holds, added in the order of the ids
    if (positions_.empty()) return;
    Tensor rows = rows_.get(*step.ctx, {int64_t(positions_.size()), dim}, dy.dtype);
    ops::gather_rows(*step.ctx, dy.reshape({dy.numel() / dim, dim}), ids_tensor(positions_), rows);
    Tensor dw = weight.grad();
    ops::scatter_add_rows(*step.ctx, rows, ids_tensor(local_ids_), dw);
    return;
  }
  const int64_t n = ids_.numel();
  KILN_CHECK(dy.numel() == n * dim, "Embedding {}: gradient {} does not match ({}, {})",
             weight.spec().name, shape_str(dy.shape), n, dim);
  Tensor dw = weight.grad();
  ops::scatter_add_rows(*step.ctx, dy.reshape({n, dim}), ids_, dw);
}

}  // namespace kiln::nn
