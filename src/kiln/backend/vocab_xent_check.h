// backend/vocab_xent_check.h — shape and dtype checks of the vocab-parallel cross-entropy's
// combining ops that every backend makes alike.
#pragma once
#include <cstdint>

#include "kiln/core/tensor.h"

namespace kiln::ops {

// gathered (R, N, 3) f32 and combined (3, N) f32; returns N.
int64_t check_vocab_combine(const char* op, const Tensor& gathered, const Tensor& combined);

// combined (3, N) f32, sumexp (N) f64, labels (N) i32, weights (N) f32 or undefined, lse (N) f32,
// totals (3) i64; returns N.
int64_t check_vocab_totals(const char* op, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                           const Tensor& weights, const Tensor& lse, const Tensor& totals);

}  // namespace kiln::ops
