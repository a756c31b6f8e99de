// backend/cuda/matmul.cc — matmul on cuBLASLt. kiln's row-major C = op(A) op(B) is cuBLASLt's
// column-major C^T = op(B)^T op(A)^T, so B's storage goes in as cuBLASLt's A and A's as its B,
// each stored (rows, cols, ld) matrix read as a column-major (cols, rows, ld) one. f32 operands
// multiply in f32 (no TF32, as on the CPU); bf16 / f16 ones accumulate in f32. Bias, ReLU and
// tanh-GELU are cuBLASLt epilogues; erf-GELU, which cuBLASLt lacks, runs as a kernel after it.
#include <cublasLt.h>

#include <mutex>
#include <vector>

#include "kiln/backend/cuda/cublaslt_library.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/matmul_plan.h"
#include "kiln/backend/cuda/runtime.h"
#include "kiln/backend/matmul_check.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("op matmul: cuBLASLt {}: {}", what, cublaslt().GetStatusString(status));
}

struct LtDevice {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// The device's cuBLASLt handle and workspace, made on first use and kept for the process.
const LtDevice& lt_device(int index) {
  static std::mutex mu;
  static std::vector<LtDevice> devices(static_cast<size_t>(device_count()));
  const std::lock_guard lock(mu);
  LtDevice& d = devices[size_t(index)];
  if (!d.handle) {
    check_lt(cublaslt().Create(&d.handle), "create");
    check(cudaMalloc(&d.workspace, kWorkspaceBytes), "matmul workspace");
  }
  return d;
}

cudaDataType_t cuda_type(DType t) {
  if (t == DType::bf16) return CUDA_R_16BF;
  if (t == DType::f16) return CUDA_R_16F;
  return CUDA_R_32F;
}

struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  ~Layout() { cublaslt().MatrixLayoutDestroy(h); }
};
struct Desc {
  cublasLtMatmulDesc_t h = nullptr;
  ~Desc() { cublaslt().MatmulDescDestroy(h); }
};
struct Preference {
  cublasLtMatmulPreference_t h = nullptr;
  ~Preference() { cublaslt().MatmulPreferenceDestroy(h); }
};

// The view's stored matrix as cuBLASLt's column-major (cols, rows, ld) layout.
void make_layout(Layout& l, const MatView& v, const Batch& batch) {
  check_lt(cublaslt().MatrixLayoutCreate(&l.h, cuda_type(v.t.dtype), uint64_t(v.cols),
                                      uint64_t(v.rows), v.ld),
           "layout");
  if (batch.count == 1) return;
  const int32_t count = int32_t(batch.count);
  check_lt(cublaslt().MatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                            sizeof(count)),
           "batch count");
  check_lt(cublaslt().MatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &batch.stride, sizeof(batch.stride)),
           "batch stride");
}

cublasLtEpilogue_t epilogue(const MatmulOpts& o) {
  const bool bias = o.bias != nullptr;
  switch (o.act) {
    case Activation::relu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case Activation::gelu_tanh: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

void make_desc(Desc& d, const MatView& a, const MatView& b, const MatmulOpts& o) {
  check_lt(cublaslt().MatmulDescCreate(&d.h, CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F), "desc");
  // cuBLASLt's A is kiln's B and vice versa.
  const cublasOperation_t ta = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
           "transa");
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
           "transb");
  const cublasLtEpilogue_t ep = epilogue(o);
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)),
           "epilogue");
  if (!o.bias) return;
  const void* bias = o.bias->data;
  const cudaDataType_t bias_type = cuda_type(o.bias->dtype);
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof(bias)),
           "bias");
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                          sizeof(bias_type)),
           "bias type");
}

// The first element of outer batch `batch0` of the view.
std::byte* at(const MatView& v, int64_t batch0) {
  return static_cast<std::byte*>(element(v)) +
         batch0 * v.batch_stride[0] * int64_t(dtype_size(v.t.dtype));
}

}  // namespace

void matmul(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
            const MatmulOpts& opts) {
  static const Tensor no_bias;
  check_devices(ctx, "matmul", {&a.t, &b.t, &c.t, opts.bias ? opts.bias : &no_bias});
  require_device(ctx.device);
  const OpScope scope("matmul");
  const auto [M, N, K] = check_matmul(a, b, c, opts);
  if (M == 0 || N == 0) return;
  KILN_CHECK(K > 0 || (opts.beta == 1.0f && !opts.bias && opts.act == Activation::none),
             "op matmul: K = 0 on {} is only supported as a no-op accumulate", ctx.device.str());
  if (K == 0) return;
  KILN_CHECK(opts.act != Activation::gelu_erf || covers_tensor(c),
             "op matmul: erf-GELU on {} needs an output view covering its whole tensor",
             ctx.device.str());
  check(cudaSetDevice(ctx.device.index), "cudaSetDevice");
  const LtDevice& lt = lt_device(ctx.device.index);
  const bool merged = mergeable(a) && mergeable(b) && mergeable(c);
  Layout la, lb, lc;
  make_layout(la, b, inner_batch(b, merged));  // cuBLASLt's A
  make_layout(lb, a, inner_batch(a, merged));
  make_layout(lc, c, inner_batch(c, merged));
  Desc desc;
  make_desc(desc, a, b, opts);
  Preference pref;
  check_lt(cublaslt().MatmulPreferenceCreate(&pref.h), "preference");
  check_lt(cublaslt().MatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &kWorkspaceBytes, sizeof(kWorkspaceBytes)),
           "workspace");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_lt(cublaslt().MatmulAlgoGetHeuristic(lt.handle, desc.h, la.h, lb.h, lc.h, lc.h, pref.h, 1,
                                          &heuristic, &found),
           "heuristic");
  KILN_CHECK(found > 0, "op matmul: cuBLASLt has no algorithm for {} x {} x {} in {} -> {}", M, N,
             K, dtype_name(a.t.dtype), dtype_name(c.t.dtype));
  const int64_t outer = merged ? 1 : c.batch[0];
  for (int64_t b0 = 0; b0 < outer; ++b0)
    check_lt(cublaslt().Matmul(lt.handle, desc.h, &opts.alpha, at(b, b0), la.h, at(a, b0), lb.h,
                            &opts.beta, at(c, b0), lc.h, at(c, b0), lc.h, &heuristic.algo,
                            lt.workspace, kWorkspaceBytes, stream_of(ctx)),
             "matmul");
  if (opts.act == Activation::gelu_erf) {
    Tensor out = c.t;
    launch_gelu_forward(false, out, out, stream_of(ctx));
    check(cudaGetLastError(), "matmul gelu");
  }
}

}  // namespace kiln::ops::cuda
