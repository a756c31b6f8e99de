// backend/cpu/matmul.h — internal switches of the CPU matmul, for tests and benchmarks.
#pragma once

namespace kiln::ops::cpu {

// When on, bf16/f16 matmuls take the f32 fallback (operands converted to f32 in scratch) as if
// oneDNN could not build their primitive on this CPU. Off by default.
void force_matmul_f32_fallback(bool on);
// When on, products take the matmul primitive even where an inner-product primitive fits
// (bench/op_times times both). Off by default.
void force_matmul_primitive(bool on);

}  // namespace kiln::ops::cpu
