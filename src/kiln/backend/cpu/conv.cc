// backend/cpu/conv.cc — 2-D convolutions on oneDNN over NHWC activations. Primitives are cached
// by shape per thread; weights arrive in PyTorch's (K, C/groups, R, S) and are reordered to the
// layout each primitive prefers (format `any`), which is what lets oneDNN pick its fast kernels.
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>

#include "kiln/backend/backend.h"
#include "kiln/backend/cpu/key_hash.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

static_assert(sizeof(ConvShape) == 14 * 8, "ConvShape must have no padding (it is hashed)");

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
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
  memory::desc x_md, w_md, y_md;  // user layouts: nhwc, (g)oihw, nhwc
  memory::dims strides, dilates, pad_l, pad_r;
  std::optional<dnnl::convolution_forward::primitive_desc> fwd_pd;
  std::optional<dnnl::convolution_forward> fwd;
  std::optional<Staged> fwd_w;
  std::optional<dnnl::convolution_backward_data> bwd_data;
  std::optional<Staged> bwd_data_w;
  std::optional<dnnl::convolution_backward_weights> bwd_weights;
  std::optional<Staged> bwd_dw;  // primitive layout -> user layout, accumulating (sum post-op)
};

ConvEntry make_entry(const ConvShape& s) {
  KILN_CHECK(s.groups >= 1 && s.C % s.groups == 0 && s.K % s.groups == 0,
             "conv2d: channels {} -> {} are not divisible by groups {}", s.C, s.K, s.groups);
  KILN_CHECK(s.P() > 0 && s.Q() > 0, "conv2d: input {}x{} is too small for kernel {}x{}", s.H,
             s.W, s.R, s.S);
  ConvEntry e;
  e.x_md = memory::desc({s.N, s.C, s.H, s.W}, dt::f32, tag::nhwc);
  e.y_md = memory::desc({s.N, s.K, s.P(), s.Q()}, dt::f32, tag::nhwc);
  e.w_md = s.groups == 1
               ? memory::desc({s.K, s.C, s.R, s.S}, dt::f32, tag::oihw)
               : memory::desc({s.groups, s.K / s.groups, s.C / s.groups, s.R, s.S}, dt::f32,
                              tag::goihw);
  e.strides = {s.stride_h, s.stride_w};
  e.dilates = {s.dil_h - 1, s.dil_w - 1};  // oneDNN counts dilation from 0
  e.pad_l = {s.pad_h, s.pad_w};
  // Right padding that makes oneDNN's output size equal P, Q (may be below pad_l).
  e.pad_r = {(s.P() - 1) * s.stride_h + s.dil_h * (s.R - 1) + 1 - s.H - s.pad_h,
             (s.Q() - 1) * s.stride_w + s.dil_w * (s.S - 1) + 1 - s.W - s.pad_w};
  return e;
}

memory::desc any_weights(const ConvEntry& e) {
  return memory::desc(e.w_md.dims(), dt::f32, tag::any);
}

ConvEntry& entry(const ConvShape& s) {
  thread_local std::unordered_map<ConvShape, ConvEntry, KeyBytesHash<ConvShape>, KeyBytesEqual<ConvShape>> cache;
  auto it = cache.find(s);
  if (it == cache.end()) it = cache.emplace(s, make_entry(s)).first;
  ConvEntry& e = it->second;
  if (!e.fwd_pd) {
    const dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, e.x_md,
        any_weights(e), e.y_md, e.strides, e.dilates, e.pad_l, e.pad_r);
    e.fwd_pd.emplace(d, cpu_engine());
  }
  return e;
}

void run(dnnl::primitive& p, std::unordered_map<int, memory> args) {
  p.execute(cpu_stream(), args);
}

}  // namespace

void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y) {
  ConvEntry& e = entry(s);
  if (!e.fwd) {
    e.fwd.emplace(*e.fwd_pd);
    e.fwd_w.emplace(e.w_md, e.fwd_pd->weights_desc(), true);
  }
  memory xm(e.x_md, cpu_engine(), const_cast<float*>(x));
  memory ym(e.y_md, cpu_engine(), y);
  e.fwd_w->user.set_data_handle(const_cast<float*>(w));
  if (e.fwd_w->reorder) e.fwd_w->reorder->execute(cpu_stream(), e.fwd_w->user, e.fwd_w->prim);
  run(*e.fwd, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, e.fwd_w->prim}, {DNNL_ARG_DST, ym}});
  cpu_stream().wait();
}

void conv2d_backward_data(const ConvShape& s, const float* dy, const float* w, float* dx) {
  ConvEntry& e = entry(s);
  if (!e.bwd_data) {
    const dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, e.x_md,
                                                  any_weights(e), e.y_md, e.strides, e.dilates,
                                                  e.pad_l, e.pad_r);
    const dnnl::convolution_backward_data::primitive_desc pd(d, cpu_engine(), *e.fwd_pd);
    e.bwd_data.emplace(pd);
    e.bwd_data_w.emplace(e.w_md, pd.weights_desc(), true);
  }
  memory dym(e.y_md, cpu_engine(), const_cast<float*>(dy));
  memory dxm(e.x_md, cpu_engine(), dx);
  Staged& ws = *e.bwd_data_w;
  ws.user.set_data_handle(const_cast<float*>(w));
  if (ws.reorder) ws.reorder->execute(cpu_stream(), ws.user, ws.prim);
  run(*e.bwd_data,
      {{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, ws.prim}, {DNNL_ARG_DIFF_SRC, dxm}});
  cpu_stream().wait();
}

void conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw) {
  ConvEntry& e = entry(s);
  if (!e.bwd_weights) {
    const dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, e.x_md,
                                                     any_weights(e), e.y_md, e.strides,
                                                     e.dilates, e.pad_l, e.pad_r);
    const dnnl::convolution_backward_weights::primitive_desc pd(d, cpu_engine(), *e.fwd_pd);
    e.bwd_weights.emplace(pd);
    // The primitive overwrites its output; a reorder with a sum post-op adds it into dw.
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(sum);
    e.bwd_dw.emplace(e.w_md, pd.diff_weights_desc(), false, attr);
    if (!e.bwd_dw->reorder) {  // same layout: still compute into scratch, then add
      e.bwd_dw->prim = memory(pd.diff_weights_desc(), cpu_engine());
      e.bwd_dw->reorder = dnnl::reorder(e.bwd_dw->prim, e.bwd_dw->user, attr);
    }
  }
  memory xm(e.x_md, cpu_engine(), const_cast<float*>(x));
  memory dym(e.y_md, cpu_engine(), const_cast<float*>(dy));
  Staged& dws = *e.bwd_dw;
  dws.user.set_data_handle(dw);
  run(*e.bwd_weights,
      {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_WEIGHTS, dws.prim}});
  dws.reorder->execute(cpu_stream(), dws.prim, dws.user);
  cpu_stream().wait();
}

}  // namespace kiln::ops
