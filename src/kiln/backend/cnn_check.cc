#include "kiln/backend/cnn_check.h"

#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {

int64_t check_avgpool(const char* op, const Tensor& x, const Tensor& y) {
  KILN_CHECK(x.rank() == 4 && y.rank() == 2 && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(3),
             "op {}: {} and {} are not (N, H, W, C) and (N, C)", op, shape_str(x.shape),
             shape_str(y.shape));
  return x.dim(1) * x.dim(2);
}

int64_t check_running_update(const char* op, const Tensor& mean, const Tensor& var, int64_t rows,
                             const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& num_batches_tracked) {
  for (const Tensor* t : {&mean, &var, &running_mean, &running_var, &num_batches_tracked})
    expect_dtype(op, "statistic", *t, {DType::f32});
  const int64_t C = mean.numel();
  KILN_CHECK(var.numel() == C && running_mean.numel() == C && running_var.numel() == C &&
                 num_batches_tracked.numel() == 1,
             "op {}: statistics {} {} {} {} do not match {} channels and one counter", op,
             shape_str(var.shape), shape_str(running_mean.shape), shape_str(running_var.shape),
             shape_str(num_batches_tracked.shape), C);
  KILN_CHECK(rows > 1, "op {}: an unbiased variance needs more than one row, got {}", op, rows);
  return C;
}

}  // namespace kiln::ops
