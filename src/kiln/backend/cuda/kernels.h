// backend/cuda/kernels.h — how a CUDA op launches a kernel of its own: run_kernel, a body
// (bodies*.h) over items 0 .. items-1 on grid_for(items), sized for the device (grid.h), on
// `stream` (a cudaStream_t).
// Defined in launch.cuh; each .cu file (elementwise.cu, rows.cu, optim.cu, cnn.cu) instantiates it
// for the bodies of its families. Callers (op_checks.h's run) have checked devices, dtypes and
// shapes, and check the launch for errors.
#pragma once
#include <cstdint>

namespace kiln::ops::cuda {

template <typename Body>
void run_kernel(int64_t items, const Body& body, void* stream);

}  // namespace kiln::ops::cuda
