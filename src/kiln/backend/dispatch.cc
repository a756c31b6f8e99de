// backend/dispatch.cc — the op table's entry points (backend.h): each runs the implementation
// of the context's device, ops::cpu:: (backend/cpu/) or ops::cuda:: (backend/cuda/). The entries of
// backend/ops.def are defined from the list; the few ops with a dispatch of their own are written
// out below it.
#include <span>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kiln/backend/checks.h"
#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/dispatch_cuda.h"
#include "kiln/backend/op_shape.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

// What a recorded CPU call keeps of an argument (by value, for replay) and how it hands it back:
// a tensor view or a small struct as it is; the segments of a multi-tensor op and the bias of
// matmul's options as copies of what they point to.
template <typename T>
std::decay_t<T> kept(const T& v) {
  return v;
}
std::vector<TensorSegment> kept(std::span<const TensorSegment> s) { return {s.begin(), s.end()}; }
struct KeptMatmulOpts {
  MatmulOpts opts;
  Tensor bias, bias_grad;
};
KeptMatmulOpts kept(const MatmulOpts& o) {
  return {o, o.bias ? *o.bias : Tensor{}, o.bias_grad ? *o.bias_grad : Tensor{}};
}

template <typename T>
T& passed(T& v) {
  return v;
}
std::span<const TensorSegment> passed(std::vector<TensorSegment>& s) { return s; }
const MatmulOpts& passed(KeptMatmulOpts& k) {
  if (k.opts.bias) k.opts.bias = &k.bias;
  if (k.opts.bias_grad) k.opts.bias_grad = &k.bias_grad;
  return k.opts;
}

// Every tensor that an op's arguments hold lives on ctx's device (route.h's check_devices).
void check_arg_devices(const Context& ctx, const char* op, const Tensor& t) { check_devices(ctx, op, {&t}); }
void check_arg_devices(const Context& ctx, const char* op, const MatView& v) { check_devices(ctx, op, {&v.t}); }
void check_arg_devices(const Context& ctx, const char* op, const DropoutMask& m) {
  check_devices(ctx, op, {&m.sample_offset});
}
void check_arg_devices(const Context& ctx, const char* op, const MatmulOpts& o) {
  if (o.bias) check_devices(ctx, op, {o.bias});
  if (o.bias_grad) check_devices(ctx, op, {o.bias_grad});
}
template <typename T>
void check_arg_devices(const Context&, const char*, const T&) {}

// A CPU kernel call, op(ctx, args...), now; while a graph is captured on ctx (the simulated device,
// backend/graph.h) it first keeps the call with copies of its arguments for replay. The call that
// runs now takes the caller's arguments: nothing is copied or allocated on the step's path.
template <typename... Params, typename... Args>
void run_cpu_op(Context& ctx, void (*op)(Context&, Params...), Args&&... args) {
  if (ctx.recorder)
    ctx.recorder->record([op, keep = std::make_tuple(kept(args)...)](Context& run) mutable {
      std::apply([&](auto&... k) { op(run, passed(k)...); }, keep);
    });
  op(ctx, std::forward<Args>(args)...);
}

}  // namespace

#ifdef KILN_HAVE_CUDA
namespace {
[[maybe_unused]] const bool kCudaRegistered = (cuda::register_backend(), true);
}  // namespace
#endif

// Each op of the list: the entry point checks the arguments' devices, then the arguments
// (checks.h), notes the op's shape for the profile (op_shape.h; only while it records), and runs
// the CUDA or the CPU implementation.
#define KILN_OP(name, params, args)                                                            \
  void name(Context& ctx, KILN_OP_PARAMS params) {                                             \
    [&](const auto&... arg) { (check_arg_devices(ctx, #name, arg), ...); }(KILN_OP_PARAMS args); \
    check_args(check::name{}, KILN_OP_PARAMS args);                                            \
    const ShapeNote note([&] { return describe(check::name{}, KILN_OP_PARAMS args); });         \
    if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, #name, name(ctx, KILN_OP_PARAMS args));        \
    run_cpu_op(ctx, &cpu::name, KILN_OP_PARAMS args);                                          \
  }
#include "kiln/backend/ops.def"

void copy(Context& ctx, const Tensor& src, Tensor& dst) {
#ifdef KILN_HAVE_CUDA
  if (!src.device.cpu_kernels() || !dst.device.cpu_kernels()) return cuda::copy(ctx, src, dst);
#endif
  KILN_CHECK(!ctx.recorder || src.device == dst.device,
             "op copy: {} -> {} inside a graph capture; copies between host and device memory run "
             "outside the captured ops", src.device.str(), dst.device.str());
  run_cpu_op(ctx, &cpu::copy, src, dst);
}

void split_master(Context& ctx, const Tensor& w, Tensor& high, Tensor& low) {
  KILN_CHECK(!on_cuda(ctx), "op split_master: split master weights are for the CPU backend only");
  run_cpu_op(ctx, &cpu::split_master, w, high, low);
}

void join_master(Context& ctx, const Tensor& high, const Tensor& low, Tensor& w) {
  KILN_CHECK(!on_cuda(ctx), "op join_master: split master weights are for the CPU backend only");
  run_cpu_op(ctx, &cpu::join_master, high, low, w);
}

bool conv2d_native(DType dtype) { return cpu::conv2d_native(dtype); }

ConvScratch conv2d_scratch_bytes(const ConvShape& s, DType dtype, bool accumulate) {
  return cpu::conv2d_scratch_bytes(s, dtype, accumulate);
}

}  // namespace kiln::ops
