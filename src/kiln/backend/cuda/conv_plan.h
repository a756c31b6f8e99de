// backend/cuda/conv_plan.h — how the CUDA weight gradient of a dtype runs on cuDNN, as a plain
// function tested on the CPU (backend/cuda/conv.cc runs it).
#pragma once
#include "kiln/core/dtype.h"

namespace kiln::ops::cuda {

// The descriptors of one weight-gradient path: their dtype (x, dy and cuDNN's filter gradient
// share it; the convolution accumulates in f32), whether x and dy are first copied to f32, and
// whether those copies may be multiplied in TF32 (bf16 / f16 values, which TF32 holds exactly).
// `label` names the path in the algorithm cache's key.
struct WgradPath {
  DType descriptors = DType::f32;
  bool f32_copies = false;
  bool tf32_exact = false;
  const char* label = "conv2d_backward_weights";
};

// bf16: cuDNN's bf16 filter gradient (PSEUDO_BFLOAT16: bf16 tensors, f32 accumulation) straight
// from the activations, rounded once to bf16 and added into the f32 gradient; unless cuDNN has
// no deterministic algorithm for the shape (`native_failed`), then the f32 copies. f16 keeps the
// f32 copies: an f16 filter gradient summed over N*P*Q positions under a loss scale can pass
// f16's 65504. f32 runs as it is.
inline WgradPath wgrad_path(DType operands, bool native_failed) {
  if (operands == DType::f32) return {};
  if (operands == DType::bf16 && !native_failed)
    return {DType::bf16, false, false, "conv2d_backward_weights bf16-dw"};
  return {DType::f32, true, true, "conv2d_backward_weights"};
}

}  // namespace kiln::ops::cuda
