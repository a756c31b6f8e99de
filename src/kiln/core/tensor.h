// core/tensor.h — a dense, row-major block of elements with a dtype, a shape and a device;
// owning or a view. Element data is touched only by backend/ ops (and by host-side I/O on CPU
// tensors); layers pass tensors to ops.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/core/device.h"
#include "kiln/core/dtype.h"
#include "kiln/core/inline_vector.h"

namespace kiln {

using Shape = InlineVector<int64_t, 8>;  // inline: no host allocation per tensor

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(2, 3, 4)"

// Backend ops open and close on any thread (backend/profile.h's OpScope counts them). On the
// simulated device element data is reachable through Tensor::ptr only while one is open, as a
// GPU's is not reachable from host code at all: host code reading or writing device data outside
// an op is an error there instead of a crash on the first GPU.
void count_open_ops(int delta);
bool any_op_open();

struct Tensor {
  std::shared_ptr<std::byte[]> storage;  // null for a view of memory owned elsewhere
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  Device device;

  // 64-byte aligned, uninitialised storage on `device` (core/allocator.h).
  static Tensor empty(Shape shape, DType dtype = DType::f32, Device device = Device::cpu());
  // Zero-filled host storage.
  static Tensor zeros(Shape shape, DType dtype = DType::f32);
  // A view of memory kiln does not own (a parameter slice, a mapped file).
  static Tensor view(void* data, Shape shape, DType dtype = DType::f32,
                     Device device = Device::cpu());

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  int rank() const { return int(shape.size()); }
  bool defined() const { return data != nullptr; }

  template <typename T> T* ptr() & {
    check_host_access();
    return static_cast<T*>(data);
  }
  template <typename T> const T* ptr() const& {
    check_host_access();
    return static_cast<const T*>(data);
  }
  // Not of a temporary: one that owns its memory (an op's scratch where the context has no arena)
  // frees it at the end of the statement, and the pointer would outlive it. Name the tensor.
  template <typename T> T* ptr() && = delete;
  template <typename T> const T* ptr() const&& = delete;
  void check_host_access() const {
    if (device.kind == DeviceKind::sim && !any_op_open()) refuse_host_access();
  }
  [[noreturn]] void refuse_host_access() const;

  // Same storage, new shape with the same element count.
  Tensor reshape(Shape new_shape) const;
  // Rows [begin, end) of the first dimension, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
};

// A copy of a host f32 tensor's elements (tests, host-side I/O).
std::vector<float> to_float_vector(const Tensor& t);

}  // namespace kiln
