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

// The kernels' products: `best` the device's best (sm_90a: the warpgroup's wgmma; elsewhere the
// warps' mma.sync), `warp` the warps' mma.sync on a device of compute capability 9.0 too, whose
// kernels are built for sm_90a beside the wgmma ones so that one GPU can compare the two paths.
// Only a 9.0 device may launch `warp`: other targets build those kernels empty.
enum class FlashProducts { best, warp };

// T: bf16_t or f16_t.
template <typename T>
cudaError_t launch_flash_forward(const FlashForwardArgs<T>& a, void* stream, FlashProducts products);
// The rows' D into a.dot, the key pass (dk, dv), then the query pass (dq).
template <typename T>
cudaError_t launch_flash_backward(const FlashBackwardArgs<T>& a, void* stream, FlashProducts products);

}  // namespace kiln::ops::cuda
