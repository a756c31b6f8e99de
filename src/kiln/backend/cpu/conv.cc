// backend/cpu/conv.cc — 2-D convolutions on oneDNN over NHWC activations. Primitives are cached
// by (shape, dtype) per thread; weights arrive in PyTorch's (K, C/groups, R, S) and are
// reordered to the layout each primitive prefers (format `any`), which is what lets oneDNN pick
// its fast kernels. A dtype whose primitives oneDNN cannot create on this CPU (it throws at
// primitive-descriptor creation) runs in f32 on converted copies, announced once on stderr.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kiln/backend/cpu/conv.h"
#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/dnnl_exec.h"
#include "kiln/backend/cpu/key_hash.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"
#include "kiln/core/notice.h"

namespace kiln::ops::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

static_assert(sizeof(ConvShape) == 14 * 8, "ConvShape must have no padding (it is hashed)");

struct ConvKey {
  ConvShape shape;
  int64_t dtype;  // DType of x, w, y
};
static_assert(sizeof(ConvKey) == 15 * 8, "ConvKey must have no padding (it is hashed)");

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

dt dnnl_type(DType d) {
  switch (d) {
    case DType::f32: return dt::f32;
    case DType::bf16: return dt::bf16;
    case DType::f16: return dt::f16;
    default: throw Error("conv2d: dtype {} is not f32, bf16 or f16", dtype_name(d));
  }
}

// A user-layout tensor and, when the primitive wants another layout, its own copy plus the
// reorder between them.
struct Staged {
  memory user, prim;
  std::optional<dnnl::reorder> reorder;

  Staged(const memory::desc& user_md, const memory::desc& prim_md, bool to_prim,
         const dnnl::primitive_attr& attr = {}) {
    user = memory(user_md, cpu_engine(), DNNL_MEMORY_NONE);
    if (user_md == prim_md) {
      prim = user;
      return;
    }
    prim = memory(prim_md, cpu_engine());
    reorder = to_prim ? dnnl::reorder(user, prim) : dnnl::reorder(prim, user, attr);
  }
};

struct ConvEntry {
  memory::desc x_md, w_md, y_md, dw_md;  // user layouts: nhwc, (g)oihw, nhwc, f32 (g)oihw
  memory x, y;  // x_md and y_md over each call's tensors (x or dx, y or dy)
  memory::dims strides, dilates, pad_l, pad_r;
  dt type = dt::f32;
  // Bits of the primitives oneDNN could not create for this dtype (kFwd, kBwdData,
  // kBwdWeights): those ops run in f32 on copies.
  unsigned unsupported = 0;
  std::optional<dnnl::convolution_forward::primitive_desc> fwd_pd;
  std::optional<dnnl::convolution_forward> fwd;
  std::optional<Staged> fwd_w;
  std::optional<dnnl::convolution_backward_data> bwd_data;
  std::optional<Staged> bwd_data_w;
  std::optional<dnnl::convolution_backward_weights> bwd_weights;
  std::optional<Staged> bwd_dw;  // primitive layout -> user layout, accumulating (sum post-op)
  std::optional<dnnl::reorder> bwd_dw_copy;  // the same without the sum; none when the layouts match
};

memory::desc weights_md(const ConvShape& s, dt type, tag t) {
  if (s.groups == 1) return memory::desc({s.K, s.C, s.R, s.S}, type, t == tag::any ? t : tag::oihw);
  return memory::desc({s.groups, s.K / s.groups, s.C / s.groups, s.R, s.S}, type,
                      t == tag::any ? t : tag::goihw);
}

ConvEntry make_entry(const ConvShape& s, dt type) {
  ConvEntry e;
  e.type = type;
  e.x_md = memory::desc({s.N, s.C, s.H, s.W}, type, tag::nhwc);
  e.y_md = memory::desc({s.N, s.K, s.P(), s.Q()}, type, tag::nhwc);
  e.x = memory(e.x_md, cpu_engine(), DNNL_MEMORY_NONE);
  e.y = memory(e.y_md, cpu_engine(), DNNL_MEMORY_NONE);
  e.w_md = weights_md(s, type, tag::oihw);
  e.dw_md = weights_md(s, dt::f32, tag::oihw);
  e.strides = {s.stride_h, s.stride_w};
  e.dilates = {s.dil_h - 1, s.dil_w - 1};  // oneDNN counts dilation from 0
  e.pad_l = {s.pad_h, s.pad_w};
  // Right padding that makes oneDNN's output size equal P, Q (may be below pad_l).
  e.pad_r = {(s.P() - 1) * s.stride_h + s.dil_h * (s.R - 1) + 1 - s.H - s.pad_h,
             (s.Q() - 1) * s.stride_w + s.dil_w * (s.S - 1) + 1 - s.W - s.pad_w};
  return e;
}

constexpr unsigned kFwd = 1, kBwdData = 2, kBwdWeights = 4;

// Says once per dtype what runs instead of a missing low-precision convolution.
void announce_fallback(DType dtype, const char* what) {
  static std::once_flag once[3];
  const int i = dtype == DType::bf16 ? 0 : dtype == DType::f16 ? 1 : 2;
  std::call_once(once[i], [&] {
    const std::string_view name = dtype_name(dtype);
    notice("oneDNN has no {} convolution on this CPU ({}); convolutions keep {} storage and compute in f32 on "
           "converted copies", name, what, name);
  });
}

// oneDNN 2.6's AVX2 1x1 kernel for the weight gradient of a strided convolution (its
// "reduce to unit stride" copy) reads memory it did not write: wrong gradients now and then and
// a corrupted heap (CnnOps and the ResNet tests under ONEDNN_MAX_CPU_ISA=AVX2). The next
// implementation oneDNN offers for the same descriptor is used instead.
void skip_broken_impl(dnnl::convolution_backward_weights::primitive_desc& pd, const ConvShape& s) {
  if (s.stride_h == 1 && s.stride_w == 1) return;
  while (std::string_view(pd.impl_info_str()) == "jit_1x1:avx2")
    if (!pd.next_impl()) break;
}

// Runs `create` (primitive-descriptor creation); a dnnl::error marks the entry unsupported for
// a low-precision dtype (announced once) and is a kiln::Error for f32.
template <typename F>
bool try_create(ConvEntry& e, unsigned which, DType dtype, const char* op, F create) {
  if (e.unsupported & which) return false;
  try {
    create();
    return true;
  } catch (const dnnl::error& err) {
    if (dtype == DType::f32) throw Error("{}: oneDNN cannot create the primitive: {}", op, err.what());
    e.unsupported |= which;
    announce_fallback(dtype, err.what());
    return false;
  }
}

// The cached entry for (s, dtype) with its forward primitive descriptor, or null when oneDNN
// has no such convolution on this CPU.
ConvEntry* entry(const ConvShape& s, DType dtype, const char* op) {
  thread_local std::unordered_map<ConvKey, ConvEntry, KeyBytesHash<ConvKey>, KeyBytesEqual<ConvKey>>
      cache;
  const ConvKey key{s, int64_t(dtype)};
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_entry(s, dnnl_type(dtype))).first;
  ConvEntry& e = it->second;
  if (!e.fwd_pd && !try_create(e, kFwd, dtype, op, [&] {
        const dnnl::convolution_forward::desc d(
            dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, e.x_md,
            weights_md(s, e.type, tag::any), e.y_md, e.strides, e.dilates, e.pad_l, e.pad_r);
        e.fwd_pd.emplace(d, cpu_engine());
      }))
    return nullptr;
  return &e;
}

// An f32 copy of t in the context's scratch.
Tensor to_f32(Context& ctx, const Tensor& t) {
  Tensor f = ctx.scratch_tensor(t.shape, DType::f32);
  cast(ctx, t, f);
  return f;
}

void* data_of(const Tensor& t) { return const_cast<void*>(t.data); }

}  // namespace

bool conv2d_native(DType dtype) {
  ConvShape s;
  s.N = 1, s.H = s.W = 4, s.C = s.K = 16, s.R = s.S = 3, s.pad_h = s.pad_w = 1;
  return entry(s, dtype, "conv2d") != nullptr;
}

void conv2d_forward(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& w,
                    Tensor& y) {
  const OpScope scope = expect_cpu(ctx, "conv2d_forward", {&x, &w, &y});
  ConvEntry* e = entry(s, x.dtype, "conv2d_forward");
  if (e && !e->fwd) {
    e->fwd.emplace(*e->fwd_pd);
    e->fwd_w.emplace(e->w_md, e->fwd_pd->weights_desc(), true);
  }
  if (!e) {
    const ScratchScope own_scratch(ctx);  // the f32 copies
    Tensor yf = ctx.scratch_tensor(y.shape, DType::f32);
    cpu::conv2d_forward(ctx, s, to_f32(ctx, x), to_f32(ctx, w), yf);
    cast(ctx, yf, y);
    return;
  }
  e->x.set_data_handle(data_of(x));
  e->y.set_data_handle(y.data);
  e->fwd_w->user.set_data_handle(data_of(w));
  if (e->fwd_w->reorder) reorder(*e->fwd_w->reorder, cpu_stream(), e->fwd_w->user, e->fwd_w->prim);
  execute(*e->fwd, cpu_stream(), {{DNNL_ARG_SRC, e->x}, {DNNL_ARG_WEIGHTS, e->fwd_w->prim}, {DNNL_ARG_DST, e->y}});
  cpu_stream().wait();
}

void conv2d_backward_data(Context& ctx, const ConvShape& s, const Tensor& dy, const Tensor& w,
                          Tensor& dx) {
  const OpScope scope = expect_cpu(ctx, "conv2d_backward_data", {&dy, &w, &dx});
  ConvEntry* e = entry(s, dy.dtype, "conv2d_backward_data");
  if (e && !e->bwd_data &&
      !try_create(*e, kBwdData, dy.dtype, "conv2d_backward_data", [&] {
        const dnnl::convolution_backward_data::desc d(
            dnnl::algorithm::convolution_direct, e->x_md, weights_md(s, e->type, tag::any),
            e->y_md, e->strides, e->dilates, e->pad_l, e->pad_r);
        const dnnl::convolution_backward_data::primitive_desc pd(d, cpu_engine(), *e->fwd_pd);
        e->bwd_data.emplace(pd);
        e->bwd_data_w.emplace(e->w_md, pd.weights_desc(), true);
      }))
    e = nullptr;
  if (!e) {
    const ScratchScope own_scratch(ctx);  // the f32 copies
    Tensor dxf = ctx.scratch_tensor(dx.shape, DType::f32);
    cpu::conv2d_backward_data(ctx, s, to_f32(ctx, dy), to_f32(ctx, w), dxf);
    cast(ctx, dxf, dx);
    return;
  }
  e->y.set_data_handle(data_of(dy));
  e->x.set_data_handle(dx.data);
  Staged& ws = *e->bwd_data_w;
  ws.user.set_data_handle(data_of(w));
  if (ws.reorder) reorder(*ws.reorder, cpu_stream(), ws.user, ws.prim);
  execute(*e->bwd_data, cpu_stream(),
          {{DNNL_ARG_DIFF_DST, e->y}, {DNNL_ARG_WEIGHTS, ws.prim}, {DNNL_ARG_DIFF_SRC, e->x}});
  cpu_stream().wait();
}

// A weight gradient as one product over the output pixels: col (NPQ, R·S·C) holds the window
// of x each output pixel reads (zeros in the padding), dw' (K, R·S·C) = dy' (K, NPQ) x col, and dw
// (K, C, R, S) is dw' with its taps moved behind the channels. oneDNN's inner-product kernels run
// that product faster than its convolution weight-gradient kernels where
// - the kernel is 1x1 without padding (no gather at stride 1; dw' is dw): ResNet-50 bf16 at batch
//   16 on AVX-512, the step's weight gradients 268 -> 244 ms, f32 579 -> 521 ms;
// - a larger kernel is strided, or bf16 / f16 with at most 7x7 output pixels: the jit kernels
//   split their work over the few output rows (bf16, batch 16, 512 channels 14 -> 7: 9.2 -> 5.3
//   ms; 7 -> 7: 7.0 -> 5.2 ms; f32 strided 1.4-1.6x; f32 7 -> 7 and larger stride-1 outputs lose).
// The gather copies whole channel rows: with few channels (the stem's 3) it costs more than the
// convolution.
bool is_window_product(const ConvShape& s, DType dtype) {
  // Without oneDNN's low-precision kernels, the f32 fallback (f32 copies, then this) serves.
  if (s.groups != 1 || (dtype != DType::f32 && !conv2d_native(dtype))) return false;
  if (s.R == 1 && s.S == 1) return s.pad_h == 0 && s.pad_w == 0;
  if (s.dil_h != 1 || s.dil_w != 1 || s.C < 64) return false;
  const bool strided = s.stride_h > 1 || s.stride_w > 1;
  return strided || (dtype != DType::f32 && s.P() * s.Q() <= 49);
}

// col (images, P, Q, R, S, C) = the window of x (N, H, W, C) each output pixel of images n0, n0 + 1,
// ... reads, zeros where it lies in the padding.
void gather_windows(const ConvShape& s, const Tensor& x, int64_t n0, int64_t images, Tensor& col) {
  const int64_t P = s.P(), Q = s.Q(), bytes = s.C * dtype_size(x.dtype);
  const auto* in = static_cast<const char*>(x.data) + n0 * s.H * s.W * bytes;
  auto* out = static_cast<char*>(col.data);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < images; ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q) {
        char* window = out + ((n * P + p) * Q + q) * s.R * s.S * bytes;
        for (int64_t r = 0; r < s.R; ++r)
          for (int64_t t = 0; t < s.S; ++t) {
            const int64_t h = p * s.stride_h - s.pad_h + r, w = q * s.stride_w - s.pad_w + t;
            char* tap = window + (r * s.S + t) * bytes;
            if (h < 0 || h >= s.H || w < 0 || w >= s.W) std::memset(tap, 0, size_t(bytes));
            else std::memcpy(tap, in + ((n * s.H + h) * s.W + w) * bytes, size_t(bytes));
          }
      }
}

// dw (K, C, R, S) (+)= product (K, R, S, C).
void move_taps_behind_channels(const ConvShape& s, const Tensor& product, Tensor& dw, bool accumulate) {
  const int64_t taps = s.R * s.S;
  const float* from = product.ptr<float>();
  float* to = dw.ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const float v = from[(k * taps + t) * s.C + c];
        float& o = to[(k * s.C + c) * taps + t];
        o = accumulate ? o + v : v;
      }
}

// Gathered windows are taken a few images at a time, so that their scratch stays near this size
// (one image at least) whatever the batch.
constexpr int64_t kWindowBytes = int64_t(64) << 20;
std::atomic<int64_t> window_bytes{kWindowBytes};

void set_window_scratch_bytes(int64_t bytes) { window_bytes = bytes > 0 ? bytes : kWindowBytes; }

// How window_product_weights runs for a shape: the windows gathered into scratch `chunk` images at
// a time (else the activations are the windows, all images at once), the product written into dw
// itself (`direct`) or into f32 scratch.
struct WindowPlan {
  int64_t pixels, window, chunk;
  bool gathered, direct;
};

WindowPlan window_plan(const ConvShape& s, DType dtype, bool accumulate) {
  WindowPlan p;
  p.pixels = s.P() * s.Q();
  p.window = s.R * s.S * s.C;
  p.gathered = s.R != 1 || s.S != 1 || s.stride_h != 1 || s.stride_w != 1;
  p.direct = !accumulate && s.R == 1 && s.S == 1;
  const int64_t image_bytes = p.pixels * p.window * int64_t(dtype_size(dtype));
  p.chunk = p.gathered ? std::clamp<int64_t>(window_bytes.load() / image_bytes, 1, s.N) : s.N;
  return p;
}

void window_product_weights(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy, Tensor& dw,
                            bool accumulate) {
  const ScratchScope own_scratch(ctx);
  const WindowPlan plan = window_plan(s, x.dtype, accumulate);
  const int64_t pixels = plan.pixels, window = plan.window, chunk = plan.chunk;
  const bool gathered = plan.gathered, direct = plan.direct;
  Tensor product = direct ? dw.reshape({s.K, window}) : ctx.scratch_tensor({s.K, window}, DType::f32);
  Tensor col = gathered ? ctx.scratch_tensor({chunk * pixels, window}, x.dtype) : x.reshape({s.N * pixels, window});
  const Tensor dy_rows = dy.reshape({s.N * pixels, s.K});
  for (int64_t n0 = 0; n0 < s.N; n0 += chunk) {
    const int64_t images = std::min(chunk, s.N - n0);
    if (gathered) gather_windows(s, x, n0, images, col);
    cpu::matmul(ctx, mat(dy_rows.slice_rows(n0 * pixels, (n0 + images) * pixels), true),
                mat(col.slice_rows(0, images * pixels)), mat(product),
                {.beta = n0 == 0 ? 0.0f : 1.0f});
  }
  if (!direct) move_taps_behind_channels(s, product, dw, accumulate);
}

ConvScratch conv2d_scratch_bytes(const ConvShape& s, DType dtype, bool accumulate) {
  const auto bytes = [](int64_t numel, DType t) { return int64_t(Arena::bytes_taken(numel, t)); };
  const int64_t x = s.N * s.H * s.W * s.C, y = s.N * s.P() * s.Q() * s.K, w = s.K * (s.C / s.groups) * s.R * s.S;
  if (dtype != DType::f32 && !conv2d_native(dtype)) {  // f32 copies of the operands and the result
    const int64_t copies = bytes(x, DType::f32) + bytes(y, DType::f32);
    return {copies + bytes(w, DType::f32), copies + bytes(w, DType::f32),
            copies + cpu::conv2d_scratch_bytes(s, DType::f32, accumulate).backward_weights};
  }
  if (!is_window_product(s, dtype)) return {};
  const WindowPlan p = window_plan(s, dtype, accumulate);
  const int64_t product = p.direct ? 0 : bytes(s.K * p.window, DType::f32);
  return {0, 0, product + (p.gathered ? bytes(p.chunk * p.pixels * p.window, dtype) : 0)};
}

void conv2d_backward_weights(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy,
                             Tensor& dw, bool accumulate) {
  const OpScope scope = expect_cpu(ctx, "conv2d_backward_weights", {&x, &dy, &dw});
  if (is_window_product(s, x.dtype)) return window_product_weights(ctx, s, x, dy, dw, accumulate);
  ConvEntry* e = entry(s, x.dtype, "conv2d_backward_weights");
  if (e && !e->bwd_weights &&
      !try_create(*e, kBwdWeights, x.dtype, "conv2d_backward_weights", [&] {
        // Low-precision inputs, f32 weight gradient (oneDNN accumulates in f32 either way).
        const dnnl::convolution_backward_weights::desc d(
            dnnl::algorithm::convolution_direct, e->x_md, weights_md(s, dt::f32, tag::any),
            e->y_md, e->strides, e->dilates, e->pad_l, e->pad_r);
        dnnl::convolution_backward_weights::primitive_desc pd(d, cpu_engine(), *e->fwd_pd);
        skip_broken_impl(pd, s);
        e->bwd_weights.emplace(pd);
        // The primitive overwrites its output; a reorder with a sum post-op adds it into dw.
        dnnl::post_ops sum;
        sum.append_sum(1.0f);
        dnnl::primitive_attr attr;
        attr.set_post_ops(sum);
        e->bwd_dw.emplace(e->dw_md, pd.diff_weights_desc(), false, attr);
        if (e->bwd_dw->reorder) {
          e->bwd_dw_copy.emplace(e->bwd_dw->prim, e->bwd_dw->user);
        } else {  // same layout: an accumulating product still computes into scratch, then adds
          e->bwd_dw->prim = memory(pd.diff_weights_desc(), cpu_engine());
          e->bwd_dw->reorder = dnnl::reorder(e->bwd_dw->prim, e->bwd_dw->user, attr);
        }
      }))
    e = nullptr;
  if (!e) {
    const ScratchScope own_scratch(ctx);  // the f32 copies
    cpu::conv2d_backward_weights(ctx, s, to_f32(ctx, x), to_f32(ctx, dy), dw, accumulate);
    return;
  }
  e->x.set_data_handle(data_of(x));
  e->y.set_data_handle(data_of(dy));
  Staged& dws = *e->bwd_dw;
  dws.user.set_data_handle(dw.data);
  const bool direct = !accumulate && !e->bwd_dw_copy;  // the primitive writes dw itself
  execute(*e->bwd_weights, cpu_stream(),
          {{DNNL_ARG_SRC, e->x}, {DNNL_ARG_DIFF_DST, e->y}, {DNNL_ARG_DIFF_WEIGHTS, direct ? dws.user : dws.prim}});
  if (accumulate) reorder(*dws.reorder, cpu_stream(), dws.prim, dws.user);
  else if (!direct) reorder(*e->bwd_dw_copy, cpu_stream(), dws.prim, dws.user);
  cpu_stream().wait();
}

}  // namespace kiln::ops::cpu
