// backend/cpu/matmul.h — internal switches of the CPU matmul, for tests.
#pragma once

namespace kiln::ops::cpu {

// When on, bf16/f16 matmuls take the f32 fallback (operands converted to f32 in scratch) as if
// oneDNN could not build their primitive on this CPU. Off by default.
void force_matmul_f32_fallback(bool on);

}  // namespace kiln::ops::cpu
