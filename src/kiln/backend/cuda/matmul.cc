// backend/cuda/matmul.cc — matmul on cuBLASLt. kiln's row-major C = op(A) op(B) is cuBLASLt's
// column-major C^T = op(B)^T op(A)^T, so B's storage goes in as cuBLASLt's A and A's as its B,
// each stored (rows, cols, ld) matrix read as a column-major (cols, rows, ld) one. Compute type
// CUBLAS_COMPUTE_32F: f32 operands multiply in f32 (TF32 would need _FAST_TF32; none, as on the
// CPU); bf16 / f16 ones on tensor cores, accumulating in f32 (under _PEDANTIC, BERT-large ran at
// 2% of an H200's bf16 peak). Bias, ReLU and tanh-GELU are cuBLASLt epilogues; erf-GELU, which
// cuBLASLt lacks, runs as a kernel after it; a weight gradient's bias gradient is the BGRADB
// epilogue (matmul_plan.h), written to scratch and added. cuBLASLt takes a bias of D's dtype or
// f32 (for 16-bit D); any other goes in as an f32 copy. Batches that do not merge into one stride
// (heads views) run as one pointer-array call where cuBLASLt has one, else a call per outer batch.
#include <cublasLt.h>

#include <fmt/format.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/cublaslt_library.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/matmul_plan.h"
#include "kiln/backend/cuda/matmul_search.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/backend/cuda/runtime.h"
#include "kiln/backend/matmul_check.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"
#include "kiln/core/notice.h"

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
  std::string algo_prefix;  // the GPU and cuBLASLt's version: the start of every algorithm key
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
    d.algo_prefix = fmt::format("{}|cublasLt {}", describe_device(index), cublaslt().GetVersion());
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
  if (batch.table) {
    const uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
    check_lt(cublaslt().MatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof(mode)),
             "pointer-array batch");
    return;
  }
  check_lt(cublaslt().MatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &batch.stride, sizeof(batch.stride)),
           "batch stride");
}

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::relu: return CUBLASLT_EPILOGUE_RELU;
    case Epilogue::relu_bias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::gelu_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::bias_grad_b: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// The epilogue's vector: the bias it reads or the bias gradient it writes.
const Tensor* epilogue_vector(const MatmulOpts& o) { return o.bias_grad ? o.bias_grad : o.bias; }

// The epilogue's vector from `offset` bytes on (a batch's bias, called batch by batch).
void set_bias_pointer(const Desc& desc, const MatmulOpts& o, int64_t offset = 0) {
  const Tensor* v = epilogue_vector(o);
  if (!v) return;
  const void* bias = static_cast<const std::byte*>(v->data) + offset;
  check_lt(cublaslt().MatmulDescSetAttribute(desc.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
           "bias");
}

void make_desc(Desc& d, const MatView& a, const MatView& b, const MatmulOpts& o) {
  check_lt(cublaslt().MatmulDescCreate(&d.h, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  // cuBLASLt's A is kiln's B and vice versa.
  const cublasOperation_t ta = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
           "transa");
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
           "transb");
  const cublasLtEpilogue_t ep = lt_epilogue(epilogue_for(o));
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)),
           "epilogue");
  if (!epilogue_vector(o)) return;
  set_bias_pointer(d, o);
  const cudaDataType_t bias_type = cuda_type(epilogue_vector(o)->dtype);
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                          sizeof(bias_type)),
           "bias type");
  if (o.bias_batch_stride == 0) return;
  check_lt(cublaslt().MatmulDescSetAttribute(d.h, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &o.bias_batch_stride,
                                             sizeof(o.bias_batch_stride)),
           "bias batch stride");
}

// The first element of outer batch `batch0` of the view.
std::byte* at(const MatView& v, int64_t batch0) {
  return static_cast<std::byte*>(element(v)) +
         batch0 * v.batch_stride[0] * int64_t(dtype_size(v.t.dtype));
}

void set_alignment(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, uint32_t bytes) {
  check_lt(cublaslt().MatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)), "alignment");
}

std::string view_key(const MatView& v) {
  return fmt::format("{}x{}/{}{}b{}x{}s{},{}{}", v.rows, v.cols, v.ld, v.trans ? "t" : "", v.batch[0], v.batch[1],
                     v.batch_stride[0], v.batch_stride[1], dtype_name(v.t.dtype));
}

// What the algorithm choice depends on: the GPU and cuBLASLt's version (`prefix`), the three views,
// the epilogue, beta, alignments (cuBLASLt's A, B, C and the epilogue's vector).
std::string product_key(const std::string& prefix, const MatView& a, const MatView& b, const MatView& c,
                        const MatmulOpts& o, const std::array<uint32_t, 4>& align, Batching mode) {
  return fmt::format("{}|matmul|{}|{}|{}|ep{}{}{}{}|beta{}|align{},{},{}{}{}", prefix,
                     view_key(a), view_key(b), view_key(c), int(o.act), o.bias ? dtype_name(o.bias->dtype) : "",
                     o.bias_batch_stride ? fmt::format("s{}", o.bias_batch_stride) : "", o.bias_grad ? "bgradb" : "",
                     o.beta, align[0], align[1], align[2], align[3] ? fmt::format(",v{}", align[3]) : "",
                     mode == Batching::by_table ? "|ptrs" : "");
}

// The pointer tables of a by_table product (matmul_plan.h), filled on the stream in scratch:
// cuBLASLt's A, B and C tables, c.batch[0] * c.batch[1] entries each.
void** fill_tables(Context& ctx, const MatView& a, const MatView& b, const MatView& c) {
  const int64_t count = c.batch[0] * c.batch[1];
  const Tensor tables = ctx.scratch_tensor({3 * count}, DType::i64);
  auto* entries = static_cast<uintptr_t*>(tables.data);
  run(ctx, "matmul tables", 3 * count, pointer_tables({&b, &a, &c}, {at(b, 0), at(a, 0), at(c, 0)}, entries));
  return reinterpret_cast<void**>(entries);
}

// A product's cuBLASLt objects and algorithm, made on its first call and kept for the process:
// creating descriptors and formatting the algorithm key on every call would cost the host
// microseconds per product.
struct Plan {
  Layout la, lb, lc;  // cuBLASLt's A (kiln's b), B (kiln's a), C
  Desc desc;          // the bias pointer is set per call
  Batching mode = Batching::merged;
  int64_t calls = 1;  // calls per product (c.batch[0] when by_outer)
  cublasLtMatmulAlgo_t algo{};
  // Where the heuristic has no algorithm with the bias-gradient epilogue or the bias batch stride:
  // bias_grad runs after the product; the bias pointer moves by bias_step bytes per (batch) call.
  bool bias_grad_apart = false;
  int64_t bias_step = 0;
  bool plainer = false;  // a plainer plan exists for the product (plainer_plan)
};

// Every call's first matrix shares the first one's alignment when the batch stride keeps it; by
// table, every matrix is a call's.
uint32_t view_alignment(const MatView& v, int64_t calls, Batching mode = Batching::merged) {
  if (mode == Batching::by_table) return all_matrices_alignment(at(v, 0), v);
  uint32_t al = alignment(at(v, 0));
  if (calls > 1) al = std::min(al, alignment(at(v, 1)));
  return al;
}

// cuBLASLt's A, B and C alignments (kiln's b, a, c), and the epilogue vector's.
std::array<uint32_t, 4> product_alignment(const MatView& a, const MatView& b, const MatView& c, const MatmulOpts& o,
                                          Batching mode) {
  const int64_t calls = calls_for(c, mode);
  return {view_alignment(b, calls, mode), view_alignment(a, calls, mode), view_alignment(c, calls, mode),
          vector_alignment(o)};
}

// A by_table product's tables, filled on first use.
class TablesOnce {
 public:
  TablesOnce(Context& ctx, const MatView& a, const MatView& b, const MatView& c) : ctx_(ctx), a_(a), b_(b), c_(c) {}
  void** get() {
    if (!tables_) tables_ = fill_tables(ctx_, a_, b_, c_);
    return tables_;
  }

 private:
  Context& ctx_;
  const MatView &a_, &b_, &c_;
  void** tables_ = nullptr;
};

// Layouts, descriptor and the algorithm (the cache file's, searched, or the heuristic's).
std::unique_ptr<Plan> make_plan(Context& ctx, const LtDevice& lt, const MatView& a, const MatView& b,
                                const MatView& c, const MatmulOpts& opts, Batching mode,
                                const std::array<uint32_t, 4>& align, TablesOnce& tables) {
  auto plan = std::make_unique<Plan>();
  plan->mode = mode;
  plan->calls = calls_for(c, mode);
  make_layout(plan->la, b, inner_batch(b, mode));
  make_layout(plan->lb, a, inner_batch(a, mode));
  make_layout(plan->lc, c, inner_batch(c, mode));
  make_desc(plan->desc, a, b, opts);
  Preference pref;
  check_lt(cublaslt().MatmulPreferenceCreate(&pref.h), "preference");
  check_lt(cublaslt().MatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &kWorkspaceBytes, sizeof(kWorkspaceBytes)),
           "workspace");
  const uint32_t align_a = align[0], align_b = align[1], align_c = align[2];  // cuBLASLt's order
  set_alignment(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
  set_alignment(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
  set_alignment(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
  set_alignment(pref.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
  LtProduct p;
  p.handle = lt.handle;
  p.desc = plan->desc.h;
  p.la = plan->la.h, p.lb = plan->lb.h, p.lc = plan->lc.h;
  p.preference = pref.h;
  p.alpha = &opts.alpha, p.beta = &opts.beta;
  p.a = at(b, 0), p.b = at(a, 0), p.c = at(c, 0);
  p.c_offset = size_t(at(c, 0) - static_cast<std::byte*>(c.t.data));
  p.c_tensor_bytes = c.t.nbytes();
  if (mode == Batching::by_table) {
    void** t = tables.get();
    const int64_t n = c.batch[0] * c.batch[1];
    p.a = t, p.b = t + n, p.c = t + 2 * n;
    p.time_in_place = true;
  }
  p.workspace = lt.workspace, p.workspace_bytes = kWorkspaceBytes;
  p.stream = stream_of(ctx);
  plan->algo = matmul_algorithm(product_key(lt.algo_prefix, a, b, c, opts, align, mode), p);
  return plan;
}

// Whether a product made in `mode` with `opts` has a plainer plan (plainer_plan).
bool has_plainer(Batching mode, const MatmulOpts& opts) {
  return mode == Batching::by_table || opts.bias_grad || opts.bias_batch_stride != 0;
}

// The plan for a product whose plan in `mode` cuBLASLt refused, at its making or at its first
// launch: a pointer-array batch as a call per outer batch; an epilogue's bias gradient as
// bias_grad after the product; batched biases as a call per batch, each with its bias.
std::unique_ptr<Plan> plainer_plan(Context& ctx, const LtDevice& lt, const MatView& a, const MatView& b,
                                   const MatView& c, const MatmulOpts& opts, Batching mode,
                                   const std::array<uint32_t, 4>& align, TablesOnce& tables) {
  static std::once_flag said_tables, said_vectors;
  if (mode == Batching::by_table) {
    std::call_once(said_tables,
                   [] { notice("cuBLASLt refused a pointer-array batch: heads products run a call per batch"); });
    return make_plan(ctx, lt, a, b, c, opts, Batching::by_outer, align, tables);
  }
  std::call_once(said_vectors, [] {
    notice("cuBLASLt refused a bias-gradient epilogue or batched biases: those run apart, or a call per bias");
  });
  MatmulOpts product = opts;
  product.bias_grad = nullptr;
  product.bias_batch_stride = 0;
  const bool per_batch = opts.bias && opts.bias_batch_stride != 0;  // one call per batch, each with its bias
  const int64_t calls = per_batch ? c.batch[0] : calls_for(c, mode);
  const std::array<uint32_t, 4> align_each = {view_alignment(b, calls), view_alignment(a, calls),
                                              view_alignment(c, calls), align[3]};
  auto plan = make_plan(ctx, lt, a, b, c, product, mode == Batching::merged && !per_batch ? mode : Batching::by_outer,
                        per_batch ? align_each : align, tables);
  plan->bias_grad_apart = opts.bias_grad != nullptr;
  if (per_batch) plan->bias_step = opts.bias_batch_stride * int64_t(dtype_size(opts.bias->dtype));
  return plan;
}

using Plans = std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash>;

// The product's plan, made on its first call (its slot, which a refused launch replaces with the
// plainer plan). Plans are never freed: they live as long as the process, and freeing them at exit
// could run after cuBLASLt is gone.
std::unique_ptr<Plan>& plan_for(Plans& plans, Context& ctx, const LtDevice& lt, const MatView& a,
                                const MatView& b, const MatView& c, const MatmulOpts& opts, TablesOnce& tables) {
  const Batching wanted = preferred_batching(a, b, c, opts);
  const std::array<uint32_t, 4> align = product_alignment(a, b, c, opts, wanted);
  std::unique_ptr<Plan>& slot = plans[plan_key(ctx.device.index, a, b, c, opts, align)];
  if (slot) return slot;
  try {
    slot = make_plan(ctx, lt, a, b, c, opts, wanted, align, tables);
    slot->plainer = has_plainer(wanted, opts);
  } catch (const Error&) {
    if (!has_plainer(wanted, opts)) throw;
    slot = plainer_plan(ctx, lt, a, b, c, opts, wanted, align, tables);
  }
  return slot;
}

// The plan's calls of the product, up to the first cuBLASLt refuses; its status, and in `done` the
// calls made before it.
cublasStatus_t launch(const Plan& plan, Context& ctx, const LtDevice& lt, const MatView& a, const MatView& b,
                      const MatView& c, const MatmulOpts& opts, TablesOnce& tables, int64_t& done) {
  const auto call = [&](const void* pa, const void* pb, void* pc) {
    return cublaslt().Matmul(lt.handle, plan.desc.h, &opts.alpha, pa, plan.la.h, pb, plan.lb.h, &opts.beta, pc,
                             plan.lc.h, pc, plan.lc.h, &plan.algo, lt.workspace, kWorkspaceBytes, stream_of(ctx));
  };
  done = 0;
  if (!plan.bias_grad_apart) set_bias_pointer(plan.desc, opts);
  if (plan.mode == Batching::by_table) {
    void** t = tables.get();
    const int64_t n = c.batch[0] * c.batch[1];
    return call(t, t + n, t + 2 * n);
  }
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  for (; done < plan.calls; ++done) {
    if (plan.bias_step != 0) set_bias_pointer(plan.desc, opts, done * plan.bias_step);
    status = call(at(b, done), at(a, done), at(c, done));
    if (status != CUBLAS_STATUS_SUCCESS) break;
  }
  return status;
}

// The op's bias gradients (db += column sums of each batch's dy, ops.def): `sums` (batches, M), the
// epilogue's, added; else (undefined) bias_grad's of each dy.
void add_bias_grads(Context& ctx, const MatView& a, const MatView& c, const MatmulOpts& opts, const Tensor& sums) {
  const int64_t K = a.rows, M = a.cols;  // each dy (K, M), read transposed
  const int64_t batches = opts.bias_batch_stride != 0 ? c.batch[0] : 1;
  for (int64_t i = 0; i < batches; ++i) {
    Tensor db = Tensor::view(opts.bias_grad->ptr<float>() + i * opts.bias_batch_stride, {M}, DType::f32,
                             opts.bias_grad->device);
    if (sums.defined()) {
      add(ctx, db, sums.slice_rows(i, i + 1).reshape({M}), db);
      continue;
    }
    const Tensor dy = Tensor::view(static_cast<std::byte*>(a.t.data) + i * K * M * int64_t(dtype_size(a.t.dtype)),
                                   {K, M}, a.t.dtype, a.t.device);
    bias_grad(ctx, dy, db);
  }
}

}  // namespace

void matmul(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
            const MatmulOpts& opts) {
  static const Tensor no_bias;
  check_devices(ctx, "matmul", {&a.t, &b.t, &c.t, opts.bias ? opts.bias : &no_bias,
                                 opts.bias_grad ? opts.bias_grad : &no_bias});
  require_device(ctx.device);
  const OpScope scope = profiled_scope("matmul", ctx.stream);
  const auto [M, N, K] = matmul_dims(a, b);
  if (M == 0 || N == 0) {
    if (opts.bias_grad && K > 0) add_bias_grads(ctx, a, c, opts, Tensor{});  // the sums alone
    return;
  }
  KILN_CHECK(K > 0 || opts.beta == 1.0f,
             "op matmul: K = 0 on {} is only supported as a no-op accumulate", ctx.device.str());
  if (K == 0) return;
  KILN_CHECK(opts.act != Activation::gelu_erf || covers_tensor(c),
             "op matmul: erf-GELU on {} needs an output view covering its whole tensor",
             ctx.device.str());
  check(cudaSetDevice(ctx.device.index), "cudaSetDevice");
  const LtDevice& lt = lt_device(ctx.device.index);
  const ScratchScope own_scratch(ctx);
  MatmulOpts opts_lt = opts;
  Tensor bias_f32;
  if (opts.bias && opts.bias->dtype != DType::f32 && opts.bias->dtype != c.t.dtype) {
    bias_f32 = ctx.scratch_tensor(opts.bias->shape, DType::f32);
    cast(ctx, *opts.bias, bias_f32);
    opts_lt.bias = &bias_f32;
  }
  Tensor column_sums;  // (batches, M): the epilogue writes the bias gradients; the op's contract adds them
  if (opts.bias_grad) {
    const bool batched = opts.bias_batch_stride != 0;
    column_sums = ctx.scratch_tensor({batched ? c.batch[0] : 1, M}, DType::f32);
    opts_lt.bias_grad = &column_sums;
    if (batched) opts_lt.bias_batch_stride = M;
  }
  bool bias_grad_apart = false;
  {
    static std::mutex mu;  // guards the plans, and a plan's bias pointer from being set until launched
    static auto* plans = new Plans();
    const std::lock_guard lock(mu);
    TablesOnce tables(ctx, a, b, c);
    std::unique_ptr<Plan>& plan = plan_for(*plans, ctx, lt, a, b, c, opts_lt, tables);
    int64_t done = 0;
    cublasStatus_t status = launch(*plan, ctx, lt, a, b, c, opts_lt, tables, done);
    if (status != CUBLAS_STATUS_SUCCESS && plan->plainer && done == 0) {  // refused: from now on the plainer plan
      const Batching mode = plan->mode;
      plan = plainer_plan(ctx, lt, a, b, c, opts_lt, mode, product_alignment(a, b, c, opts_lt, mode), tables);
      status = launch(*plan, ctx, lt, a, b, c, opts_lt, tables, done);
    }
    check_lt(status, "matmul");
    bias_grad_apart = plan->bias_grad_apart;
  }
  if (opts.bias_grad) add_bias_grads(ctx, a, c, opts, bias_grad_apart ? Tensor{} : column_sums);
  if (opts.act == Activation::gelu_erf) {
    Tensor out = c.t;
    with_float_type(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* p = out.ptr<T>();
      run_spans(ctx, "matmul gelu", GeluForwardSpanBody<T, T>{p, p, out.numel(), packs_aligned(p), Gelu{false}});
    });
  }
}

}  // namespace kiln::ops::cuda
