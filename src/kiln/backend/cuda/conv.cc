// backend/cuda/conv.cc — 2-D convolutions on cuDNN: NHWC activations and NHWC (K, R, S, C/groups)
// filters, the layout cuDNN's NHWC kernels take (with kiln's (K, C/groups, R, S) weights as NCHW
// filters, cuDNN 9 on an H200 offered no backward algorithm kiln would take). The weights are
// transposed into scratch for each call (cudnnTransformTensor), and the weight gradient back into
// kiln's layout, added into dw when accumulating. f32 accumulation, only deterministic
// algorithms: cuDNN's first heuristic choice, or with KILN_SEARCH on the fastest of its choices,
// timed once per shape on scratch outputs and kept in the algorithm cache file
// (backend/algo_cache.h); descriptors, algorithm and workspace size made once per shape and
// process (ConvPlan); the workspace from the step's scratch. f32 convolutions use FMA math
// (no TF32, as on the CPU). cuDNN's filter gradient has the activations' dtype: for bf16 it is
// taken in bf16 (f32 accumulation) and widened into the f32 gradient by a kernel of kiln's
// (conv_plan.h, conv_bodies.h); for f16, or bf16 shapes without a deterministic bf16 algorithm,
// it runs in f32 on converted copies, which TF32 tensor cores may multiply (TF32 holds their
// values exactly: CUDNN_DEFAULT_MATH).
// Built only where CMake found cuDNN (KILN_HAVE_CUDNN); elsewhere the ops say so.
#include "kiln/backend/cuda/conv_bodies.h"
#include "kiln/backend/cuda/conv_plan.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

#ifdef KILN_HAVE_CUDNN
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/backend/algo_cache.h"
#endif

namespace kiln::ops::cuda {
namespace {

#ifdef KILN_HAVE_CUDNN

void check_dnn(cudnnStatus_t status, const char* op, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error("op {}: cuDNN {}: {}", op, what, cudnnGetErrorString(status));
}

// The device's cuDNN handle, made on first use and kept for the process.
cudnnHandle_t dnn_handle(int index, const char* op) {
  static std::mutex mu;
  static std::vector<cudnnHandle_t> handles(static_cast<size_t>(device_count()), nullptr);
  const std::lock_guard lock(mu);
  cudnnHandle_t& h = handles[size_t(index)];
  if (!h) check_dnn(cudnnCreate(&h), op, "create");
  return h;
}

cudnnDataType_t dnn_type(DType t) {
  if (t == DType::bf16) return CUDNN_DATA_BFLOAT16;
  if (t == DType::f16) return CUDNN_DATA_HALF;
  return CUDNN_DATA_FLOAT;
}

// The descriptors of one convolution in one dtype, destroyed with it.
struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t w_kcrs = nullptr, w_krsc = nullptr;  // the weights as tensors, for the transposes
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  // `tf32_exact`: f32 operands that hold bf16 / f16 values, which TF32's 10-bit mantissa holds
  // exactly, so tensor cores may multiply them (an H200's TF32 rate is 7x its f32 FMA rate).
  ConvDescs(const char* op, const ConvShape& s, DType dtype, bool tf32_exact = false) {
    const cudnnDataType_t t = dnn_type(dtype);
    check_dnn(cudnnCreateTensorDescriptor(&x), op, "tensor descriptor");
    check_dnn(cudnnCreateTensorDescriptor(&y), op, "tensor descriptor");
    check_dnn(cudnnCreateTensorDescriptor(&w_kcrs), op, "tensor descriptor");
    check_dnn(cudnnCreateTensorDescriptor(&w_krsc), op, "tensor descriptor");
    check_dnn(cudnnCreateFilterDescriptor(&w), op, "filter descriptor");
    check_dnn(cudnnCreateConvolutionDescriptor(&conv), op, "convolution descriptor");
    check_dnn(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, t, int(s.N), int(s.C), int(s.H),
                                         int(s.W)),
              op, "input");
    check_dnn(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, t, int(s.N), int(s.K), int(s.P()),
                                         int(s.Q())),
              op, "output");
    const int K = int(s.K), Cg = int(s.C / s.groups), R = int(s.R), S = int(s.S);
    check_dnn(cudnnSetFilter4dDescriptor(w, t, CUDNN_TENSOR_NHWC, K, Cg, R, S), op, "weights");
    check_dnn(cudnnSetTensor4dDescriptor(w_kcrs, CUDNN_TENSOR_NCHW, t, K, Cg, R, S), op, "weights");
    check_dnn(cudnnSetTensor4dDescriptor(w_krsc, CUDNN_TENSOR_NHWC, t, K, Cg, R, S), op, "weights");
    check_dnn(cudnnSetConvolution2dDescriptor(conv, int(s.pad_h), int(s.pad_w), int(s.stride_h),
                                              int(s.stride_w), int(s.dil_h), int(s.dil_w),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              op, "geometry");
    check_dnn(cudnnSetConvolutionGroupCount(conv, int(s.groups)), op, "groups");
    const cudnnMathType_t math =
        dtype != DType::f32 ? CUDNN_TENSOR_OP_MATH : tf32_exact ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    check_dnn(cudnnSetConvolutionMathType(conv, math), op, "math type");
  }
  ~ConvDescs() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(w_krsc);
    cudnnDestroyTensorDescriptor(w_kcrs);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;
};

// What an algorithm choice depends on: the GPU, cuDNN's version, the op, the shape and dtype (and
// the filter layout: winners timed for another layout do not carry over).
std::string conv_key(int device, const char* op, const ConvShape& s, DType dtype) {
  static const std::string gpu = describe_device(device);  // one GPU per process
  return fmt::format("{}|cudnn {}|{} krsc|{}x{}x{}x{} k{} {}x{} s{},{} p{},{} d{},{} g{}|{}", gpu, cudnnGetVersion(), op,
                     s.N, s.H, s.W, s.C, s.K, s.R, s.S, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.dil_h, s.dil_w,
                     s.groups, dtype_name(dtype));
}

// Milliseconds per run of `run(out, workspace)` (one warm-up, then three), -1 when it fails.
template <typename Run>
double time_runs(cudaStream_t stream, Run run) {
  if (run() != CUDNN_STATUS_SUCCESS) return -1;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "convolution search");
  check(cudaEventCreate(&stop), "convolution search");
  check(cudaEventRecord(start, stream), "convolution search");
  bool ok = true;
  for (int i = 0; i < 3 && ok; ++i) ok = run() == CUDNN_STATUS_SUCCESS;
  check(cudaEventRecord(stop, stream), "convolution search");
  check(cudaEventSynchronize(stop), "convolution search");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "convolution search");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ok ? double(ms) / 3 : -1;
}

// Algorithms that never add with atomics by cuDNN's documentation: taken only when no heuristic
// result says it is deterministic.
bool known_deterministic(cudnnConvolutionFwdAlgo_t) { return true; }
bool known_deterministic(cudnnConvolutionBwdDataAlgo_t a) { return a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; }
bool known_deterministic(cudnnConvolutionBwdFilterAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 && a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// What the heuristics answered, for the error when none will do: algorithm:status:deterministic.
template <typename Perf>
std::string heuristics_answer(const Perf* perf, int count) {
  std::string out;
  for (int i = 0; i < count; ++i)
    out += fmt::format("{}{}:{}:{}", i ? " " : "", int(perf[i].algo), cudnnGetErrorString(perf[i].status),
                       perf[i].determinism == CUDNN_DETERMINISTIC ? "det" : "nondet");
  return out.empty() ? "none" : out;
}

// The algorithm for `key`: cuDNN's heuristic choices (ranked) that run and are deterministic
// (kiln's ops give bitwise-repeatable results; some cuDNN algorithms add with atomics), the
// first of them, or with the search on the cache file's winner or the fastest timed now (never
// inside a graph capture: backend/algo_cache.h's choose_candidate).
// `workspace_size(algo, &bytes)` and `launch(algo, out, workspace, bytes)` (into a scratch output
// of `out_bytes`) time a candidate.
template <typename Perf, typename WorkspaceSize, typename Launch>
auto choose_algo(const char* op, const std::string& key, const Perf* perf, int count, size_t out_bytes,
                 cudaStream_t stream, WorkspaceSize workspace_size, Launch launch) {
  using Algo = decltype(perf[0].algo);
  std::vector<Algo> usable;
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC)
      usable.push_back(perf[i].algo);
  if (usable.empty())
    for (int i = 0; i < count; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && known_deterministic(perf[i].algo)) usable.push_back(perf[i].algo);
  KILN_CHECK(!usable.empty(), "op {}: cuDNN has no deterministic algorithm for {} (heuristics: {})", op, key,
             heuristics_answer(perf, count));
  const int pick = choose_candidate(AlgoCache::process(), key, int(usable.size()), capturing(stream, op), [&] {
    void* out = nullptr;
    check(cudaMalloc(&out, out_bytes), "convolution search output");
    const int best = fastest_candidate(int(usable.size()), [&](int i) {
      size_t bytes = 0;
      if (workspace_size(usable[size_t(i)], &bytes) != CUDNN_STATUS_SUCCESS) bytes = 0;
      void* ws = nullptr;
      if (bytes > 0 && cudaMalloc(&ws, bytes) != cudaSuccess) return -1.0;
      const double ms = time_runs(stream, [&] { return launch(usable[size_t(i)], out, ws, bytes); });
      cudaFree(ws);
      return ms;
    });
    cudaFree(out);
    return best;
  });
  KILN_CHECK(pick >= 0, "op {}: none of cuDNN's {} deterministic algorithms ran", op, usable.size());
  return usable[size_t(pick)];
}

// One convolution as the process runs it again and again: its descriptors, the algorithm chosen
// for it (once, by the first call: `chosen`) and that algorithm's workspace, made the first time
// the process meets its key (descriptors, heuristics and workspace queries cost the host more
// than a small convolution's launch).
template <typename Algo>
struct ConvPlan {
  ConvPlan(const char* op, const ConvShape& s, DType dtype, bool tf32_exact) : d(op, s, dtype, tf32_exact) {}
  ConvDescs d;
  std::once_flag chosen;
  Algo algo{};
  size_t workspace_bytes = 0;
  bool unusable = false;  // no deterministic algorithm for a path that has a fallback
};

// The plan for `key`, made with its descriptors the first time.
template <typename Algo>
ConvPlan<Algo>& conv_plan(const char* op, const std::string& key, const ConvShape& s, DType dtype,
                          bool tf32_exact = false) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<ConvPlan<Algo>>> plans;
  const std::lock_guard lock(mu);
  std::unique_ptr<ConvPlan<Algo>>& plan = plans[key];
  if (!plan) plan = std::make_unique<ConvPlan<Algo>>(op, s, dtype, tf32_exact);
  return *plan;
}

// Runs the plan's algorithm into `out` with a workspace from the step's scratch.
template <typename Algo, typename Launch>
void run_planned(Context& ctx, const char* op, const char* what, const ConvPlan<Algo>& plan, Launch launch,
                 void* out) {
  const size_t bytes = plan.workspace_bytes;
  const Tensor holder = ctx.scratch_tensor({std::max<int64_t>(1, int64_t((bytes + 7) / 8))}, DType::i64);
  check_dnn(launch(plan.algo, out, holder.data, bytes), op, what);
}

// Sets `plan`'s algorithm from cuDNN's heuristic answer and its workspace size.
template <typename Algo, typename Perf, typename WorkspaceSize, typename Launch>
void choose_into(ConvPlan<Algo>& plan, const char* op, const std::string& key, const Perf* perf, int found,
                 size_t out_bytes, cudaStream_t stream, WorkspaceSize workspace_size, Launch launch) {
  plan.algo = choose_algo(op, key, perf, found, out_bytes, stream, workspace_size, launch);
  check_dnn(workspace_size(plan.algo, &plan.workspace_bytes), op, "workspace size");
}

cudnnHandle_t bound_handle(Context& ctx, const char* op) {
  cudnnHandle_t h = dnn_handle(ctx.device.index, op);
  check_dnn(cudnnSetStream(h, stream_of(ctx)), op, "stream");
  return h;
}

// kiln's (K, C/groups, R, S) weights as cuDNN's NHWC filter (K, R, S, C/groups), in scratch.
Tensor filter_krsc(Context& ctx, cudnnHandle_t h, const ConvDescs& d, const Tensor& w, const char* op) {
  Tensor krsc = ctx.scratch_tensor(w.shape, w.dtype);
  const float one = 1.0f, zero = 0.0f;
  check_dnn(cudnnTransformTensor(h, &one, d.w_kcrs, w.data, &zero, d.w_krsc, krsc.data), op, "weights to KRSC");
  return krsc;
}

// One weight gradient on `path` (conv_plan.h): dw (K, C/groups, R, S) f32 (+)= the gradient.
// False, with nothing run, when cuDNN has no deterministic algorithm for the path's native 16-bit
// descriptors (the caller falls back to the f32 copies; the plan remembers the answer).
bool run_wgrad(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy, Tensor& dw, bool accumulate,
               const WgradPath& path) {
  const char* op = "conv2d_backward_weights";
  const ScratchScope own_scratch(ctx);
  const cudnnHandle_t h = bound_handle(ctx, op);
  const std::string key = conv_key(ctx.device.index, path.label, s, x.dtype);
  ConvPlan<cudnnConvolutionBwdFilterAlgo_t>& plan =
      conv_plan<cudnnConvolutionBwdFilterAlgo_t>(op, key, s, path.descriptors, path.tf32_exact);
  const ConvDescs& d = plan.d;
  Tensor xf = x, dyf = dy;
  if (path.f32_copies) {
    xf = ctx.scratch_tensor(x.shape, DType::f32);
    dyf = ctx.scratch_tensor(dy.shape, DType::f32);
    cast(ctx, x, xf);
    cast(ctx, dy, dyf);
  }
  const float one = 1.0f, zero = 0.0f, beta = accumulate ? 1.0f : 0.0f;
  const auto workspace_size = [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* n) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, a, n);
  };
  const auto launch = [&](cudnnConvolutionBwdFilterAlgo_t a, void* out, void* ws, size_t n) {
    return cudnnConvolutionBackwardFilter(h, &one, d.x, xf.data, d.y, dyf.data, d.conv, a, ws, n, &zero, d.w, out);
  };
  std::call_once(plan.chosen, [&] {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int found = 0;
    check_dnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w,
                                                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, perf),
              op, "heuristics");
    try {
      choose_into(plan, op, key, perf, found, dw.nbytes(), stream_of(ctx), workspace_size, launch);
    } catch (const Error&) {
      if (path.descriptors == DType::f32) throw;  // the last path: nothing to fall back to
      plan.unusable = true;
    }
  });
  if (plan.unusable) return false;
  const Tensor dwk = ctx.scratch_tensor(dw.shape, path.descriptors);  // (K, R, S, C/groups)
  run_planned(ctx, op, "backward weights", plan, launch, dwk.data);
  if (path.descriptors == DType::f32) {
    check_dnn(cudnnTransformTensor(h, &one, d.w_krsc, dwk.data, &beta, d.w_kcrs, dw.data), op, "weights from KRSC");
    return true;
  }
  run(ctx, op, dw.numel(),
      WgradToKcrsBody{float_ptr(op, "dw", dwk), dw.ptr<float>(), s.C / s.groups, s.R * s.S, accumulate});
  return true;
}

#endif

[[maybe_unused]] void no_cudnn(const char* op, const Context& ctx) {
  throw Error("op {}: {} needs cuDNN, which this kiln was built without", op, ctx.device.str());
}

}  // namespace

void conv2d_forward(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& w,
                    Tensor& y) {
  const char* op = "conv2d_forward";
  const OpScope scope = expect_cuda(ctx, op, {&x, &w, &y});
#ifdef KILN_HAVE_CUDNN
  const ScratchScope own_scratch(ctx);
  const cudnnHandle_t h = bound_handle(ctx, op);
  const std::string key = conv_key(ctx.device.index, op, s, x.dtype);
  ConvPlan<cudnnConvolutionFwdAlgo_t>& plan = conv_plan<cudnnConvolutionFwdAlgo_t>(op, key, s, x.dtype);
  const ConvDescs& d = plan.d;
  const Tensor wk = filter_krsc(ctx, h, d, w, op);
  const float one = 1.0f, zero = 0.0f;
  const auto workspace_size = [&](cudnnConvolutionFwdAlgo_t a, size_t* n) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, a, n);
  };
  const auto launch = [&](cudnnConvolutionFwdAlgo_t a, void* out, void* ws, size_t n) {
    return cudnnConvolutionForward(h, &one, d.x, x.data, d.w, wk.data, d.conv, a, ws, n, &zero, d.y, out);
  };
  std::call_once(plan.chosen, [&] {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    check_dnn(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                     &found, perf),
              op, "heuristics");
    choose_into(plan, op, key, perf, found, y.nbytes(), stream_of(ctx), workspace_size, launch);
  });
  run_planned(ctx, op, "forward", plan, launch, y.data);
#else
  no_cudnn(op, ctx);
#endif
}

void conv2d_backward_data(Context& ctx, const ConvShape& s, const Tensor& dy, const Tensor& w,
                          Tensor& dx) {
  const char* op = "conv2d_backward_data";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &w, &dx});
#ifdef KILN_HAVE_CUDNN
  const ScratchScope own_scratch(ctx);
  const cudnnHandle_t h = bound_handle(ctx, op);
  const std::string key = conv_key(ctx.device.index, op, s, dy.dtype);
  ConvPlan<cudnnConvolutionBwdDataAlgo_t>& plan = conv_plan<cudnnConvolutionBwdDataAlgo_t>(op, key, s, dy.dtype);
  const ConvDescs& d = plan.d;
  const Tensor wk = filter_krsc(ctx, h, d, w, op);
  const float one = 1.0f, zero = 0.0f;
  const auto workspace_size = [&](cudnnConvolutionBwdDataAlgo_t a, size_t* n) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, a, n);
  };
  const auto launch = [&](cudnnConvolutionBwdDataAlgo_t a, void* out, void* ws, size_t n) {
    return cudnnConvolutionBackwardData(h, &one, d.w, wk.data, d.y, dy.data, d.conv, a, ws, n, &zero, d.x, out);
  };
  std::call_once(plan.chosen, [&] {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int found = 0;
    check_dnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf),
              op, "heuristics");
    choose_into(plan, op, key, perf, found, dx.nbytes(), stream_of(ctx), workspace_size, launch);
  });
  run_planned(ctx, op, "backward data", plan, launch, dx.data);
#else
  no_cudnn(op, ctx);
#endif
}

void conv2d_backward_weights(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy,
                             Tensor& dw, bool accumulate) {
  const char* op = "conv2d_backward_weights";
  const OpScope scope = expect_cuda(ctx, op, {&x, &dy, &dw});
#ifdef KILN_HAVE_CUDNN
  if (!run_wgrad(ctx, s, x, dy, dw, accumulate, wgrad_path(x.dtype, false)))
    run_wgrad(ctx, s, x, dy, dw, accumulate, wgrad_path(x.dtype, true));
#else
  no_cudnn(op, ctx);
#endif
}

}  // namespace kiln::ops::cuda
