// nn/attention_core.h — which attention core SelfAttention runs (--attention-backend): the unfused
// ops over (B, heads, S, S) tensors, or fused attention (ops::flash_attention_forward / _backward,
// nothing of size S x S in memory); automatic: fused on a CUDA device with bf16 / f16 activations
// and a head dim of 16 .. 64 in steps of 16 (every GPU has the shared memory for those), else unfused.
#pragma once
#include <cstdint>

namespace kiln::nn {

enum class AttentionCore : uint8_t { automatic, unfused, fused };

}  // namespace kiln::nn
