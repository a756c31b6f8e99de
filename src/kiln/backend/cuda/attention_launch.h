// backend/cuda/attention_launch.h — the fused attention kernels (attention.cu): the block
// algorithms of attention_forward.h and attention_backward.h under the tensor-core tile policy,
// one thread block of kFlashThreads per (block, head, sample), on `stream` (a cudaStream_t). They
// return the error of raising the kernels' shared memory limit; the caller (attention.cc) has
// checked that the device has that much, and checks the launch.
#pragma once
#include <cuda_runtime.h>

#include "kiln/backend/cuda/attention_backward.h"
#include "kiln/backend/cuda/attention_forward.h"

namespace kiln::ops::cuda {

// T: bf16_t or f16_t.
template <typename T>
cudaError_t launch_flash_forward(const FlashForwardArgs<T>& a, void* stream);
// The rows' D into a.dot, the key pass (dk, dv), then the query pass (dq).
template <typename T>
cudaError_t launch_flash_backward(const FlashBackwardArgs<T>& a, void* stream);

}  // namespace kiln::ops::cuda
