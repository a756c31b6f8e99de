// backend/step_math.h — the arithmetic of the step's scalars (backend.h, StepScalar), written once
// for the CPU backend and the CUDA kernels (KILN_HD), so that both take the same decisions bit for
// bit: the norm's sum over the parameters that count, and skip / clip from the summed squares.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/core/hd.h"

namespace kiln::ops {

// Σ sums[k] over the k with owners[k] != 0, in order of k.
KILN_HD inline double owned_sum(const double* sums, const int32_t* owners, int64_t n) {
  double total = 0.0;
  for (int64_t k = 0; k < n; ++k)
    if (owners[k]) total += sums[k];
  return total;
}

// kStepNorm, kStepSkip and kStepGradFactor from kStepNormSquares, kStepLoss and kStepMaxNorm.
KILN_HD inline void decide_step(double* s) {
  const double norm = sqrt(s[kStepNormSquares]);
  const double max_norm = s[kStepMaxNorm];
  s[kStepNorm] = norm;
  s[kStepSkip] = isfinite(s[kStepLoss]) && isfinite(norm) ? 0.0 : 1.0;
  s[kStepGradFactor] = max_norm > 0.0 && norm > max_norm ? double(float(max_norm / norm)) : 1.0;
}

// Whether the step's updates are skipped.
KILN_HD inline bool step_skipped(const double* s) { return s[kStepSkip] != 0.0; }

}  // namespace kiln::ops
