#include "kiln/nn/params.h"

#include <algorithm>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln {
namespace {

Tensor slice_view(const Tensor& flat, const ParamSpec& s) {
  Tensor t = Tensor::view(static_cast<std::byte*>(flat.data) + size_t(s.offset) * dtype_size(flat.dtype),
                          s.shape, flat.dtype, flat.device);
  t.storage = flat.storage;
  return t;
}

}  // namespace

Tensor Param::value() const { return slice_view(store->values, spec()); }
Tensor Param::grad() const {
  Tensor g = slice_view(store->grads, spec());
  if (!store->grad_written_[size_t(id)]) {
    ops::fill(*store->ctx_, g, 0.0f);
    store->grad_written_[size_t(id)] = true;
  }
  return g;
}

Param::GradTarget Param::grad_for_write() const {
  const bool written = store->grad_written_[size_t(id)];
  store->grad_written_[size_t(id)] = true;
  return {slice_view(store->grads, spec()), written};
}
Tensor Param::compute() const {
  return slice_view(store->compute.defined() ? store->compute : store->values, spec());
}

Param ParamStore::add(std::string name, Shape shape, bool decay) {
  KILN_CHECK(!allocated(), "parameter '{}' registered after the store was allocated", name);
  if (const ParamSpec* existing = find(name)) {
    KILN_CHECK(share_existing_ && existing->shape == shape && existing->decay == decay,
               "parameter '{}' registered twice", name);
    return Param{this, int(existing - specs_.data())};
  }
  ParamSpec spec;
  spec.name = std::move(name);
  spec.shape = std::move(shape);
  spec.offset = size_;
  spec.decay = decay;
  spec.numel = shape_numel(spec.shape);
  spec.full_shape = spec.shape;
  size_ += (spec.numel + 15) / 16 * 16;
  specs_.push_back(std::move(spec));
  return Param{this, int(specs_.size()) - 1};
}

Param ParamStore::add_part(std::string name, const Shape& full, bool decay, int dim, int64_t start, int64_t count) {
  KILN_CHECK(dim >= 0 && size_t(dim) < full.size() && start >= 0 && count > 0 && start + count <= full[size_t(dim)],
             "parameter '{}': part [{}, {}) of dimension {} is outside its shape", name, start, start + count, dim);
  Shape shape = full;
  shape[size_t(dim)] = count;
  const size_t registered = specs_.size();
  Param p = add(std::move(name), shape, decay);
  ParamSpec& spec = specs_[size_t(p.id)];
  if (specs_.size() == registered) {  // shared: the same part again
    KILN_CHECK(spec.part_dim == dim && spec.part_start == start && spec.full_shape == full,
               "parameter '{}' registered twice as different parts", spec.name);
    return p;
  }
  spec.part_dim = dim;
  spec.part_start = start;
  spec.full_shape = full;
  return p;
}

void ParamStore::set_padding(int64_t multiple) {
  KILN_CHECK(!allocated() && multiple >= 1, "parameter store padding {}: set it once, before allocation", multiple);
  padding_ = multiple;
}

void ParamStore::allocate(Context& ctx) {
  ctx_ = &ctx;
  segments_.clear();
  for (const ParamSpec& s : specs_) segments_.push_back({s.offset, s.numel, s.decay});
  values = Tensor::empty({padded_size()}, DType::f32, ctx.device);
  grads = Tensor::empty({padded_size()}, DType::f32, ctx.device);
  ops::fill(ctx, values, 0.0f);
  zero_grad();
  set_compute_dtype(compute_dtype_);
}

void ParamStore::to_device(Context& ctx) {
  KILN_CHECK(allocated(), "parameter store: allocate it before moving it to {}", ctx.device.str());
  ctx_ = &ctx;
  if (values.device == ctx.device) return;
  values = ops::on_device(ctx, values);
  grads = Tensor::empty({padded_size()}, DType::f32, ctx.device);
  zero_grad();
  set_compute_dtype(compute_dtype_);
}

void ParamStore::set_compute_dtype(DType dtype) {
  KILN_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
             "compute dtype {} is not a floating-point type", dtype_name(dtype));
  compute_dtype_ = dtype;
  if (!allocated()) return;
  compute = dtype == DType::f32 ? Tensor{} : Tensor::empty({padded_size()}, dtype, values.device);
  refresh_compute();
}

void ParamStore::refresh_compute() {
  if (compute.defined()) ops::cast(*ctx_, values, compute);
}

const ParamSpec* ParamStore::find(const std::string& name) const {
  auto it = std::find_if(specs_.begin(), specs_.end(), [&](auto& s) { return s.name == name; });
  return it == specs_.end() ? nullptr : &*it;
}

void ParamStore::zero_grad() {
  ops::fill(*ctx_, grads, 0.0f);
  grad_written_.assign(specs_.size(), true);
}

void ParamStore::clear_grads() { grad_written_.assign(specs_.size(), false); }

void ParamStore::settle_grads(int64_t begin, int64_t end) {
  if (end < 0) end = padded_size();
  for (size_t id = 0; id < specs_.size(); ++id) {
    const ParamSpec& s = specs_[id];
    if (!grad_written_[id] && s.offset < end && s.offset + s.numel > begin) Param{this, int(id)}.grad();
  }
}

float* ParamStore::host_data(const Tensor& flat) {
  KILN_CHECK(flat.device.is_cpu(), "parameter store: host access to parameters that live on {}", flat.device.str());
  return const_cast<float*>(flat.ptr<float>());
}

std::vector<float> ParamStore::read_back(const Tensor& flat) const {
  std::vector<float> v(static_cast<size_t>(size_));
  Tensor host = Tensor::view(v.data(), {size_});
  ops::copy(*ctx_, flat.slice_rows(0, size_), host);
  return v;
}

std::vector<float> ParamStore::values_vector() const { return read_back(values); }
std::vector<float> ParamStore::grads_vector() const { return read_back(grads); }

}  // namespace kiln
