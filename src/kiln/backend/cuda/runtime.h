// backend/cuda/runtime.h — the CUDA runtime under the backend: errors as kiln::Error, which
// devices exist, one stream per device, device memory for core/allocator.h.
#pragma once
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "kiln/core/context.h"

namespace kiln::ops::cuda {

// Throws kiln::Error "CUDA: <what>: <error string>" unless err is cudaSuccess.
void check(cudaError_t err, const char* what);

// Number of CUDA devices; 0 without a driver or a device (never throws).
int device_count();
// Why device_count() is 0, e.g. "no CUDA driver is loaded (CUDA driver version is insufficient
// for CUDA runtime version)"; empty when devices exist.
std::string unavailable_reason();
// Throws a one-line kiln::Error unless `device` is a CUDA device present in this machine.
void require_device(const Device& device);
// "NVIDIA H200, 140 GiB, sm_90" for device `index`.
std::string describe_device(int index);

// Multiprocessors of the current device (cudaGetDevice), asked once per device: what launches
// size their grids by (grid.h).
int multiprocessor_count();
// "CUDA driver: 12.8 (runtime 12.6, built with 12.6)", "cuBLASLt: 12.6.4", "cuDNN: 9.1.0": what
// this process loads (a library that cannot be loaded says why); never throws for a missing driver.
std::vector<std::string> library_versions();

// The stream ops on ctx run on: ctx.stream, or the default stream when it is null.
inline cudaStream_t stream_of(const Context& ctx) { return static_cast<cudaStream_t>(ctx.stream); }
// Whether `stream` is being captured into a graph (no allocation, synchronisation or host copy).
bool capturing(cudaStream_t stream, const char* what);
// The device's own stream, created on first use and kept for the process.
cudaStream_t device_stream(int index);
// The device's stream for copies from the host that overlap the ops (ops::staged_copy), made
// the same way.
cudaStream_t copy_stream(int index);

// Registers cudaMalloc / cudaFree as the allocator of DeviceKind::cuda (core/allocator.h).
void register_allocator();

}  // namespace kiln::ops::cuda
