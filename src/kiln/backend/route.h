// backend/route.h — which backend runs an op. The context's device decides (backend/dispatch.cc
// calls ops::cpu:: or ops::cuda::); every tensor the op touches must live on that device. A
// backend implementation starts with expect_cpu (or its own kind): a tensor on another device,
// or a device whose backend is not compiled in, is a kiln::Error naming the op, not a crash.
#pragma once
#include <initializer_list>

#include "kiln/core/context.h"
#include "kiln/core/tensor.h"
#include "kiln/backend/profile.h"

namespace kiln::ops {

struct DropoutMask;

inline bool on_cuda(const Context& ctx) { return ctx.device.kind == DeviceKind::cuda; }
// Throws for an op asked to run on a device whose backend is not compiled into this kiln.
[[noreturn]] void no_backend(const Context& ctx, const char* op);

// Throws unless ctx.device and every defined tensor in `tensors` are the same device.
void check_devices(const Context& ctx, const char* op, std::initializer_list<const Tensor*> tensors);
// check_devices, then throws unless that device is the CPU. The op holds the returned scope for
// its whole body, so that KILN_PROFILE times it (profile.h).
[[nodiscard]] OpScope expect_cpu(const Context& ctx, const char* op, std::initializer_list<const Tensor*> tensors);
// Throws unless t.dtype is one of `allowed`.
void expect_dtype(const char* op, const char* what, const Tensor& t,
                  std::initializer_list<DType> allowed);
// Throws unless a and b hold the same number of elements.
void expect_same_numel(const char* op, const Tensor& a, const Tensor& b);
// Throws unless every tensor in `others` has a's shape and dtype.
void expect_like(const char* op, const Tensor& a, std::initializer_list<const Tensor*> others);
// Throws unless `scalars` is a step's scalars block: kStepScalars f64 values in an i64 tensor.
void expect_step_scalars(const char* op, const Tensor& scalars);
// Throws unless `mask` fits a dropout over `numel` elements in rows of `row`: a sample offset of
// one i64, p in [0, 1), whole rows per sample, and Philox block counters (with a CPU lane batch
// of room past the end) within 32 bits. Returns the elements per sample.
int64_t expect_dropout_mask(const char* op, const DropoutMask& mask, int64_t numel, int64_t row = 1);
// A cross-entropy's totals: 3 f64 values in an i64 tensor.
void expect_xent_totals(const char* op, const Tensor& totals);

}  // namespace kiln::ops
