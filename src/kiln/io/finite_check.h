// io/finite_check.h — weights that hold NaN or Inf are refused where they enter kiln: imported
// (Hugging Face, TensorFlow) or resumed from a checkpoint. A run started from them would train
// on NaN from its first step; `--allow-non-finite` loads them anyway (the callers take it).
#pragma once
#include <cstdint>
#include <string>

#include "kiln/core/tensor.h"

namespace kiln::io {

// Throws kiln::Error "FILE: tensor 'NAME' holds NaN at element I (K of N values are not finite);
// --allow-non-finite loads it anyway" when any of the `n` values is NaN or +-Inf.
void check_finite(const float* values, int64_t n, const std::string& file, const std::string& name);
// The same for a host tensor of a floating-point dtype (f32, f64, f16, bf16); other dtypes pass.
void check_finite(const Tensor& t, const std::string& file, const std::string& name);

}  // namespace kiln::io
