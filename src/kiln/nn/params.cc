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

Tensor Param::value() const {
  if (!store->split()) return slice_view(store->values, spec());
  Tensor& joined = store->joined_[size_t(id)];
  if (!joined.defined()) joined = Tensor::empty(spec().shape, DType::f32, store->low.device);
  ops::join_master(*store->ctx_, slice_view(store->compute, spec()), slice_view(store->low, spec()), joined);
  return joined;
}
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

void ParamStore::split_master() {
  if (split() || !splits_master(compute_dtype_, values.device)) return;
  // The low halves wait in the gradients' buffer while values goes, so that the store never holds
  // more than before (18 bytes a parameter with the optimizer's state).
  Tensor staged = Tensor::view(grads.data, {padded_size()}, DType::u16, grads.device);
  ops::split_master(*ctx_, values, compute, staged);
  values = Tensor{};
  low = Tensor::empty({padded_size()}, DType::u16, grads.device);
  ops::copy(*ctx_, staged, low);
  zero_grad();
  joined_.assign(specs_.size(), Tensor{});
}

void ParamStore::join_master(Tensor& out) const {
  if (split()) ops::join_master(*ctx_, compute, low, out);
  else ops::copy(*ctx_, values, out);
}

void ParamStore::to_device(Context& ctx) {
  KILN_CHECK(allocated(), "parameter store: allocate it before moving it to {}", ctx.device.str());
  KILN_CHECK(!split(), "parameter store: split master weights stay where they were split");
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
  KILN_CHECK(!split() || dtype == DType::bf16, "parameter store: split master weights keep their bf16 copy");
  compute_dtype_ = dtype;
  if (!allocated() || split()) return;
  compute = dtype == DType::f32 ? Tensor{} : Tensor::empty({padded_size()}, dtype, values.device);
  refresh_compute();
}

void ParamStore::refresh_compute() {
  if (compute.defined() && !split()) ops::cast(*ctx_, values, compute);
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
  KILN_CHECK(flat.defined(), "parameter store: the f32 master weights are split (read them with values_vector())");
  KILN_CHECK(flat.device.is_cpu(), "parameter store: host access to parameters that live on {}", flat.device.str());
  return const_cast<float*>(flat.ptr<float>());
}

std::vector<float> ParamStore::read_back(const Tensor& flat) const {
  std::vector<float> v(static_cast<size_t>(size_));
  Tensor host = Tensor::view(v.data(), {size_});
  ops::copy(*ctx_, flat.slice_rows(0, size_), host);
  return v;
}

std::vector<float> ParamStore::values_vector() const {
  if (!split()) return read_back(values);
  // Both halves read back, then joined on the host: no f32 buffer on the store's device.
  std::vector<uint16_t> halves(2 * static_cast<size_t>(size_));
  Tensor high = Tensor::view(halves.data(), {size_}, DType::bf16);
  Tensor low_half = Tensor::view(halves.data() + size_, {size_}, DType::u16);
  ops::copy(*ctx_, compute.slice_rows(0, size_), high);
  ops::copy(*ctx_, low.slice_rows(0, size_), low_half);
  std::vector<float> v(static_cast<size_t>(size_));
  Tensor host = Tensor::view(v.data(), {size_});
  ops::join_master(cpu_context(), high, low_half, host);
  return v;
}
std::vector<float> ParamStore::grads_vector() const { return read_back(grads); }

}  // namespace kiln
