#include "kiln/core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "kiln/core/error.h"

namespace kiln {

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

Tensor Tensor::empty(Shape shape, DType dtype) {
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  const size_t bytes = (t.nbytes() + 63) / 64 * 64;
  auto* raw = static_cast<std::byte*>(std::aligned_alloc(64, bytes ? bytes : 64));
  KILN_CHECK(raw, "out of memory allocating a tensor of shape {}", shape_str(t.shape));
  t.storage = std::shared_ptr<std::byte[]>(raw, [](std::byte* p) { std::free(p); });
  t.data = raw;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.data, 0, t.nbytes());
  return t;
}

Tensor Tensor::view(void* data, Shape shape, DType dtype) {
  Tensor t;
  t.data = data;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

Tensor Tensor::reshape(Shape new_shape) const {
  KILN_CHECK(shape_numel(new_shape) == numel(), "cannot reshape {} to {}", shape_str(shape),
             shape_str(new_shape));
  Tensor t = *this;
  t.shape = std::move(new_shape);
  return t;
}

}  // namespace kiln
