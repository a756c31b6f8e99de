// nn/attention_core.h — which attention core SelfAttention runs (--attention-backend): the unfused
// ops over (B, heads, S, S) tensors, or fused attention (ops::flash_attention_forward / _backward,
// nothing of size S x S in memory); automatic: fused on a CUDA device with bf16 / f16 activations
// and a head dim of 16 .. 64 in steps of 16 (every GPU has the shared memory for those), else unfused.
#pragma once
#include <cstdint>

#include "kiln/core/dtype.h"

namespace kiln::nn {

enum class AttentionCore : uint8_t { automatic, unfused, fused };

// The core a layer takes (never automatic): the layer, the start line, the dry run's memory and
// the performance model decide with this one rule.
inline AttentionCore chosen_core(AttentionCore asked, bool on_gpu, DType activations, int64_t head_dim) {
  if (asked != AttentionCore::automatic) return asked;
  const bool fits = on_gpu && (activations == DType::bf16 || activations == DType::f16) && head_dim % 16 == 0 &&
                    head_dim >= 16 && head_dim <= 64;
  return fits ? AttentionCore::fused : AttentionCore::unfused;
}

}  // namespace kiln::nn
