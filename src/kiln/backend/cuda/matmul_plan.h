// backend/cuda/matmul_plan.h — how the CUDA matmul splits a MatView's two batch levels into
// cuBLASLt calls (one strided batch per call), as plain functions tested on the CPU.
#pragma once
#include <cstdint>

#include "kiln/backend/backend.h"

namespace kiln::ops::cuda {

// One level of batching that a cuBLASLt call runs: `count` matrices `stride` elements apart.
struct Batch {
  int64_t count = 1, stride = 0;
};

// Whether the view's two batch levels are one strided level (batch[0]'s stride spans batch[1]).
inline bool mergeable(const MatView& v) {
  return v.batch[0] == 1 || v.batch[1] == 1 || v.batch_stride[0] == v.batch[1] * v.batch_stride[1];
}

// The batches one call runs: both levels when `merged` (every view of the product is
// mergeable), else batch[1] per call, the call repeated for each of batch[0].
inline Batch inner_batch(const MatView& v, bool merged) {
  if (!merged) return {v.batch[1], v.batch_stride[1]};
  if (v.batch[1] == 1) return {v.batch[0], v.batch_stride[0]};
  return {v.batch[0] * v.batch[1], v.batch_stride[1]};
}

// Whether the view covers its whole tensor densely, so that a kernel may run over the tensor.
inline bool covers_tensor(const MatView& v) {
  const int64_t matrix = v.rows * v.cols;
  return v.offset == 0 && v.ld == v.cols && !v.trans &&
         (v.batch[1] == 1 || v.batch_stride[1] == matrix) &&
         (v.batch[0] == 1 || v.batch_stride[0] == v.batch[1] * matrix) &&
         v.batch[0] * v.batch[1] * matrix == v.t.numel();
}

}  // namespace kiln::ops::cuda
