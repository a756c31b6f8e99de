// backend/bn_sums.h — how every backend cuts batch norm's channel sums, so that their statistics
// agree bit for bit (host and device code): rows in fixed chunks with a double partial each, f32
// runs inside a chunk, and the rows a one-read forward samples for its shift.
#pragma once
#include <cmath>
#include <cstdint>

#include "kiln/core/hd.h"

namespace kiln::ops {

// PyTorch's running average (1 - momentum) * running + momentum * value with its roundings fixed
// (one fused multiply-add): a compiler free to contract a * b + c does so on a GPU and with FMA
// hardware, not in a portable host build, and the backends' statistics would differ.
KILN_HD inline float bn_running_average(float running, float value, float momentum) {
  return fmaf(momentum, value, (1.0f - momentum) * running);
}

// Rows per partial sum: depends on `rows` only (at most 256 chunks).
KILN_HD inline int64_t bn_chunk_rows(int64_t rows) {
  const int64_t even = (rows + 255) / 256;
  return even > 64 ? even : 64;
}

// Rows summed in f32, in groups of kBnGroup, before they are added to a chunk's double partial:
// bounds the f32 rounding at kBnFloatRun ulp whatever the shape.
constexpr int64_t kBnFloatRun = 64, kBnGroup = 4;

// The one-read forward's shift is each channel's mean over the rows 0, step, 2 step, ... with
// step = bn_shift_step(rows): about 64 of them.
KILN_HD inline int64_t bn_shift_step(int64_t rows) { return rows / 64 > 1 ? rows / 64 : 1; }
// How many rows that is.
KILN_HD inline int64_t bn_shift_samples(int64_t rows) {
  const int64_t step = bn_shift_step(rows);
  return (rows + step - 1) / step;
}

}  // namespace kiln::ops
