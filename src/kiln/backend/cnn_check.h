// backend/cnn_check.h — shape and dtype checks of the CNN ops that every backend makes alike.
#pragma once
#include <cstdint>

#include "kiln/core/tensor.h"

namespace kiln::ops {

// x (N, H, W, C) and y (N, C) of the global average pool; returns H * W.
int64_t check_avgpool(const char* op, const Tensor& x, const Tensor& y);

// The f32 statistics of batchnorm_update_running: C channels each and one counter, over more
// than one row (the running variance is unbiased); returns C.
int64_t check_running_update(const char* op, const Tensor& mean, const Tensor& var, int64_t rows,
                             const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& num_batches_tracked);

}  // namespace kiln::ops
