#include "kiln/core/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kiln/core/allocator.h"
#include "kiln/core/error.h"

namespace kiln {

namespace {
std::atomic<int> open_ops{0};
}  // namespace

void count_open_ops(int delta) { open_ops.fetch_add(delta, std::memory_order_relaxed); }
bool any_op_open() { return open_ops.load(std::memory_order_relaxed) > 0; }

void Tensor::refuse_host_access() const {
  throw Error("host code touches the data of a {} {} tensor of shape {} outside an op", device.str(),
              dtype_name(dtype), shape_str(shape));
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.device = device;
  t.storage = device_alloc(device, t.nbytes());
  t.data = t.storage.get();
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.data, 0, t.nbytes());
  return t;
}

Tensor Tensor::view(void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.data = data;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.device = device;
  return t;
}

Tensor Tensor::reshape(Shape new_shape) const {
  KILN_CHECK(shape_numel(new_shape) == numel(), "cannot reshape {} to {}", shape_str(shape),
             shape_str(new_shape));
  Tensor t = *this;
  t.shape = std::move(new_shape);
  return t;
}

std::vector<float> to_float_vector(const Tensor& t) {
  KILN_CHECK(t.device.is_cpu() && t.dtype == DType::f32,
             "to_float_vector needs a host f32 tensor, got {} on {}", dtype_name(t.dtype),
             t.device.str());
  return std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel());
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  KILN_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape[0],
             "rows [{}, {}) are outside a tensor of shape {}", begin, end, shape_str(shape));
  Tensor t = *this;
  t.shape[0] = end - begin;
  const Shape row(shape.begin() + 1, shape.end());
  t.data = static_cast<std::byte*>(data) + size_t(begin * shape_numel(row)) * dtype_size(dtype);
  return t;
}

}  // namespace kiln
