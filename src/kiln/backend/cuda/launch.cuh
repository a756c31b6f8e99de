// backend/cuda/launch.cuh — runs a body of elementwise_bodies.h on the device over grid_for(items)
// sized for the current device's multiprocessors: one kernel template shared by the .cu files,
// and run_kernel (kernels.h) on it.
#pragma once
#include <cuda_runtime.h>

#include "kiln/backend/cuda/grid.h"
#include "kiln/backend/cuda/runtime.h"

namespace kiln::ops::cuda {

template <typename Body>
__global__ void for_each_item(Grid g, int64_t items, Body body) {
  run_thread(g, blockIdx.x, threadIdx.x, items, body);
}

template <typename Body>
void launch(int64_t items, const Body& body, void* stream) {
  if (items == 0) return;
  const Grid g = grid_for(items, multiprocessor_count());
  for_each_item<<<g.blocks, g.threads, 0, static_cast<cudaStream_t>(stream)>>>(g, items, body);
}

template <typename Body>
void run_kernel(int64_t items, const Body& body, void* stream) {
  launch(items, body, stream);
}

}  // namespace kiln::ops::cuda
