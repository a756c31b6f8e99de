#include "kiln/backend/route.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/core/philox_batch.h"

namespace kiln::ops {

void check_devices(const Context& ctx, const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    KILN_CHECK(!t->defined() || t->device == ctx.device,
               "op {}: a tensor of shape {} is on {} but the op runs on {}", op,
               shape_str(t->shape), t->device.str(), ctx.device.str());
}

void no_backend(const Context& ctx, const char* op) {
  throw Error("op {}: no backend for {} is compiled into this kiln", op, ctx.device.str());
}

OpScope expect_cpu(const Context& ctx, const char* op, std::initializer_list<const Tensor*> tensors) {
  check_devices(ctx, op, tensors);
  if (!ctx.device.cpu_kernels()) no_backend(ctx, op);
  return OpScope(op);
}

void expect_dtype(const char* op, const char* what, const Tensor& t,
                  std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (t.dtype == d) return;
  throw Error("op {}: {} has dtype {}, which this op does not take", op, what, dtype_name(t.dtype));
}

void expect_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.numel() == b.numel(), "op {}: shapes {} and {} hold different element counts", op,
             shape_str(a.shape), shape_str(b.shape));
}

void expect_like(const char* op, const Tensor& a, std::initializer_list<const Tensor*> others) {
  for (const Tensor* t : others)
    KILN_CHECK(t->shape == a.shape && t->dtype == a.dtype, "op {}: {} {} does not match {} {}", op,
               dtype_name(t->dtype), shape_str(t->shape), dtype_name(a.dtype), shape_str(a.shape));
}

void expect_step_scalars(const char* op, const Tensor& scalars) {
  expect_dtype(op, "the step's scalars", scalars, {DType::i64});
  KILN_CHECK(scalars.numel() == kStepScalars, "op {}: the step's scalars hold {} values, not {}", op,
             scalars.numel(), int(kStepScalars));
}

int64_t expect_dropout_mask(const char* op, const DropoutMask& mask, int64_t numel, int64_t row) {
  expect_dtype(op, "the sample offset", mask.sample_offset, {DType::i64});
  KILN_CHECK(mask.sample_offset.numel() == 1, "op {}: the sample offset holds {} values, not 1", op,
             mask.sample_offset.numel());
  KILN_CHECK(mask.p >= 0.0f && mask.p < 1.0f, "op {}: probability {} is outside [0, 1)", op, mask.p);
  KILN_CHECK(mask.samples > 0 && row > 0 && numel % (mask.samples * row) == 0 && mask.element_offset >= 0,
             "op {}: {} elements in rows of {} do not split into {} samples (element offset {})", op, numel,
             row, mask.samples, mask.element_offset);
  const int64_t per = numel / mask.samples;
  KILN_CHECK((mask.element_offset + per + 3) / 4 + kPhiloxLanes < (int64_t(1) << 32),
             "op {}: {} elements per sample is too many", op, mask.element_offset + per);
  return per;
}

void expect_xent_totals(const char* op, const Tensor& totals) {
  expect_dtype(op, "totals", totals, {DType::i64});
  KILN_CHECK(totals.numel() == 3, "op {}: totals hold {} values, not 3", op, totals.numel());
}

}  // namespace kiln::ops
