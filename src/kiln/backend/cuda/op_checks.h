// backend/cuda/op_checks.h — what every CUDA op does before and after its launch: the device
// checks, the dtype sets, the operands as FloatPtr, the launch and its error check.
#pragma once
#include <initializer_list>

#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/runtime.h"
#include "kiln/backend/cuda/vec_access.h"
#include "kiln/backend/route.h"

namespace kiln::ops::cuda {

inline constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};

// KILN_PROFILE's scope for an op on `stream`: synchronised around the op while recording.
inline OpScope profiled_scope(const char* op, void* stream) {
  return OpScope(
      op, [](void* s) { check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "profiling"); }, stream);
}

// check_devices plus the device's presence; the op holds the scope for its body.
inline OpScope expect_cuda(const Context& ctx, const char* op,
                           std::initializer_list<const Tensor*> ts) {
  check_devices(ctx, op, ts);
  require_device(ctx.device);
  check(cudaSetDevice(ctx.device.index), "cudaSetDevice");
  return profiled_scope(op, ctx.stream);
}

inline void check_launch(const char* op) { check(cudaGetLastError(), op); }

// run_kernel on the context's stream, then the launch's error check.
template <typename Body>
void run(Context& ctx, const char* op, int64_t items, const Body& body) {
  run_kernel(items, body, stream_of(ctx));
  check_launch(op);
}

// run over a span body's spans (vec_access.h): items cover its n elements W at a time.
template <typename Body>
void run_spans(Context& ctx, const char* op, const Body& body) {
  run(ctx, op, span_count(body.n, Body::W), body);
}

// Whether a row pass's span bodies fit: the tensors share a float dtype (checked before), rows of
// `cols` are whole spans of it, and every tensor is 16-byte aligned (undefined ones skipped).
inline bool rows_fit_spans(int64_t cols, std::initializer_list<const Tensor*> ts) {
  const DType dtype = (*ts.begin())->dtype;
  bool fit = true;
  for (const Tensor* t : ts) fit = fit && (!t->defined() || (t->dtype == dtype && packs_aligned(t->data)));
  bool whole = false;
  with_float_type(dtype, [&](auto t) { whole = cols % kSpanWidth<decltype(t)> == 0; });
  return fit && whole;
}

// An optional f32 tensor's elements for a body: null where it is undefined (the weights of a
// cross-entropy's rows).
inline const float* weights_of(const Tensor& weights) {
  return weights.defined() ? weights.ptr<float>() : nullptr;
}

// A float tensor's elements for a body; throws unless its dtype is f32, bf16 or f16.
inline FloatPtr float_ptr(const char* op, const char* what, const Tensor& t) {
  expect_dtype(op, what, t, kFloat);
  return {t.data, t.dtype};
}

}  // namespace kiln::ops::cuda
