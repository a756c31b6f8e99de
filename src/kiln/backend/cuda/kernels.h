// backend/cuda/kernels.h — launches of the CUDA backend's own kernels (elementwise.cu, rows.cu,
// optim.cu, cnn.cu) on `stream` (a cudaStream_t). Callers (ops*.cc) have checked devices, dtypes
// and shapes, and check the launch for errors.
#pragma once
#include <cstdint>

#include "kiln/core/philox.h"
#include "kiln/core/tensor.h"

namespace kiln::ops::cuda {

// The body (bodies*.h) over items 0 .. items-1 on grid_for(items) (grid.h); defined for each
// body type that a .cu file instantiates.
template <typename Body>
void run_kernel(int64_t items, const Body& body, void* stream);

// Every element of t (f32, bf16, f16 or i32) = value.
void launch_fill(Tensor& t, float value, void* stream);
void launch_cast(const Tensor& src, Tensor& dst, void* stream);
void launch_add(const Tensor& a, const Tensor& b, Tensor& out, void* stream);
void launch_scale(const Tensor& x, float s, Tensor& y, void* stream);
void launch_gelu_forward(bool tanh_form, const Tensor& x, Tensor& y, void* stream);
void launch_gelu_backward(bool tanh_form, const Tensor& x, const Tensor& dy, Tensor& dx,
                          void* stream);

struct DropoutArgs {
  RngStream rng;
  const int64_t* sample_offset = nullptr;  // device memory: read by the kernel
  int64_t samples = 1;
  float p = 0;
  int64_t element_offset = 0;  // elements of each sample before this tensor's part
};
void launch_dropout(const DropoutArgs& a, const Tensor& x, Tensor& y, void* stream);

}  // namespace kiln::ops::cuda
