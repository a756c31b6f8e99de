// backend/dispatch.cc — the op table's entry points (backend.h): each runs the implementation
// of the context's device, ops::cpu:: (backend/cpu/) or ops::cuda:: (backend/cuda/).
#include <span>
#include <vector>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/dispatch_cuda.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

// run_cpu for a multi-tensor op: the caller's segments are used in place when the call runs now
// (nothing allocated on the step's path) and copied when a graph keeps the call for replay.
template <typename Op>
void run_cpu_segments(Context& ctx, std::span<const TensorSegment> segments, Op op) {
  if (!ctx.recorder) return op(ctx, segments);
  run_cpu(ctx, [op, segs = std::vector<TensorSegment>(segments.begin(), segments.end())](Context& run) mutable {
    op(run, segs);
  });
}

// Split master weights (u16 low halves beside a bf16 copy) are the CPU backend's alone:
// nn/params.h splits them only on the host.
void expect_unsplit(const char* op, const Tensor& w) {
  KILN_CHECK(w.dtype != DType::u16, "op {}: split master weights are for the CPU backend only", op);
}

}  // namespace

#ifdef KILN_HAVE_CUDA
namespace {
[[maybe_unused]] const bool kCudaRegistered = (cuda::register_backend(), true);
}  // namespace
#endif

void fill(Context& ctx, Tensor& t, float value) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "fill", fill(ctx, t, value));
  run_cpu(ctx, [=](Context& run) mutable { cpu::fill(run, t, value); });
}

void copy(Context& ctx, const Tensor& src, Tensor& dst) {
#ifdef KILN_HAVE_CUDA
  if (!src.device.cpu_kernels() || !dst.device.cpu_kernels()) return cuda::copy(ctx, src, dst);
#endif
  KILN_CHECK(!ctx.recorder || src.device == dst.device,
             "op copy: {} -> {} inside a graph capture; copies between host and device memory run "
             "outside the captured ops", src.device.str(), dst.device.str());
  run_cpu(ctx, [=](Context& run) mutable { cpu::copy(run, src, dst); });
}

void cast(Context& ctx, const Tensor& src, Tensor& dst) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "cast", cast(ctx, src, dst));
  run_cpu(ctx, [=](Context& run) mutable { cpu::cast(run, src, dst); });
}

void split_master(Context& ctx, const Tensor& w, Tensor& high, Tensor& low) {
  KILN_CHECK(!on_cuda(ctx), "op split_master: split master weights are for the CPU backend only");
  run_cpu(ctx, [=](Context& run) mutable { cpu::split_master(run, w, high, low); });
}

void join_master(Context& ctx, const Tensor& high, const Tensor& low, Tensor& w) {
  KILN_CHECK(!on_cuda(ctx), "op join_master: split master weights are for the CPU backend only");
  run_cpu(ctx, [=](Context& run) mutable { cpu::join_master(run, high, low, w); });
}

void matmul(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
            const MatmulOpts& opts) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "matmul", matmul(ctx, a, b, c, opts));
  run_cpu(ctx, [=, bias = opts.bias ? *opts.bias : Tensor{}](Context& run) mutable {
    MatmulOpts o = opts;
    if (o.bias) o.bias = &bias;
    cpu::matmul(run, a, b, c, o);
  });
}

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "add", add(ctx, a, b, out));
  run_cpu(ctx, [=](Context& run) mutable { cpu::add(run, a, b, out); });
}

void scale(Context& ctx, const Tensor& x, float s, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "scale", scale(ctx, x, s, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::scale(run, x, s, y); });
}

void bias_add(Context& ctx, Tensor& y, const Tensor& bias) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "bias_add", bias_add(ctx, y, bias));
  run_cpu(ctx, [=](Context& run) mutable { cpu::bias_add(run, y, bias); });
}

void bias_grad(Context& ctx, const Tensor& dy, Tensor& db) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "bias_grad", bias_grad(ctx, dy, db));
  run_cpu(ctx, [=](Context& run) mutable { cpu::bias_grad(run, dy, db); });
}

void gelu_forward(Context& ctx, GeluKind kind, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "gelu_forward", gelu_forward(ctx, kind, x, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::gelu_forward(run, kind, x, y); });
}

void gelu_backward(Context& ctx, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "gelu_backward", gelu_backward(ctx, kind, x, dy, dx));
  run_cpu(ctx, [=](Context& run) mutable { cpu::gelu_backward(run, kind, x, dy, dx); });
}

void tanh_forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "tanh_forward", tanh_forward(ctx, x, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::tanh_forward(run, x, y); });
}

void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "tanh_backward", tanh_backward(ctx, y, dy, dx));
  run_cpu(ctx, [=](Context& run) mutable { cpu::tanh_backward(run, y, dy, dx); });
}

void dropout_forward(Context& ctx, const Tensor& x, const DropoutMask& mask, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "dropout_forward", dropout_forward(ctx, x, mask, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::dropout_forward(run, x, mask, y); });
}

void dropout_backward(Context& ctx, const Tensor& dy, const DropoutMask& mask, Tensor& dx) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "dropout_backward", dropout_backward(ctx, dy, mask, dx));
  run_cpu(ctx, [=](Context& run) mutable { cpu::dropout_backward(run, dy, mask, dx); });
}

void layernorm_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "layernorm_forward",
                        layernorm_forward(ctx, x, w, b, eps, y, mean, rstd));
  run_cpu(ctx, [=](Context& run) mutable { cpu::layernorm_forward(run, x, w, b, eps, y, mean, rstd); });
}

void add_layernorm_forward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& w,
                           const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "add_layernorm_forward",
                        add_layernorm_forward(ctx, a, b, w, bias, eps, sum, y, mean, rstd));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::add_layernorm_forward(run, a, b, w, bias, eps, sum, y, mean, rstd);
  });
}

void layernorm_backward(Context& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw,
                        Tensor& db, bool accumulate_dx) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "layernorm_backward",
                        layernorm_backward(ctx, dy, x, w, mean, rstd, dx, dw, db, accumulate_dx));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::layernorm_backward(run, dy, x, w, mean, rstd, dx, dw, db, accumulate_dx);
  });
}

void softmax_forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "softmax_forward", softmax_forward(ctx, x, y));
  run_cpu(ctx, [=](Context& run) mutable { cpu::softmax_forward(run, x, y); });
}

void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, float scale, Tensor& dx) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "softmax_backward",
                        softmax_backward(ctx, y, dy, scale, dx));
  run_cpu(ctx, [=](Context& run) mutable { cpu::softmax_backward(run, y, dy, scale, dx); });
}

void attention_softmax_forward(Context& ctx, const Tensor& scores, const Tensor& mask,
                               Tensor& probs) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "attention_softmax_forward",
                        attention_softmax_forward(ctx, scores, mask, probs));
  run_cpu(ctx, [=](Context& run) mutable { cpu::attention_softmax_forward(run, scores, mask, probs); });
}

void attention_probs_forward(Context& ctx, const Tensor& scores, const Tensor& mask, const DropoutMask& drop,
                             Tensor& probs, Tensor& dropped) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "attention_probs_forward",
                        attention_probs_forward(ctx, scores, mask, drop, probs, dropped));
  run_cpu(ctx, [=](Context& run) mutable { cpu::attention_probs_forward(run, scores, mask, drop, probs, dropped); });
}

void attention_probs_backward(Context& ctx, const Tensor& probs, Tensor& dprobs, const DropoutMask& drop,
                              float scale, Tensor& dscores, Tensor& dropped) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "attention_probs_backward",
                        attention_probs_backward(ctx, probs, dprobs, drop, scale, dscores, dropped));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::attention_probs_backward(run, probs, dprobs, drop, scale, dscores, dropped);
  });
}

void gather_rows(Context& ctx, const Tensor& table, const Tensor& ids, Tensor& out, int64_t first) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "gather_rows", gather_rows(ctx, table, ids, out, first));
  run_cpu(ctx, [=](Context& run) mutable { cpu::gather_rows(run, table, ids, out, first); });
}

void scatter_add_rows(Context& ctx, const Tensor& dy, const Tensor& ids, Tensor& dtable, int64_t first) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "scatter_add_rows", scatter_add_rows(ctx, dy, ids, dtable, first));
  run_cpu(ctx, [=](Context& run) mutable { cpu::scatter_add_rows(run, dy, ids, dtable, first); });
}

void vocab_xent_partials(Context& ctx, const Tensor& logits, const Tensor& labels, int64_t start,
                         Tensor& partials) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "vocab_xent_partials",
                        vocab_xent_partials(ctx, logits, labels, start, partials));
  run_cpu(ctx, [=](Context& run) mutable { cpu::vocab_xent_partials(run, logits, labels, start, partials); });
}

void vocab_xent_sumexp(Context& ctx, const Tensor& logits, const Tensor& max, Tensor& sumexp) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "vocab_xent_sumexp",
                        vocab_xent_sumexp(ctx, logits, max, sumexp));
  run_cpu(ctx, [=](Context& run) mutable { cpu::vocab_xent_sumexp(run, logits, max, sumexp); });
}

void vocab_xent_combine(Context& ctx, const Tensor& gathered, Tensor& combined) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "vocab_xent_combine", vocab_xent_combine(ctx, gathered, combined));
  run_cpu(ctx, [=](Context& run) mutable { cpu::vocab_xent_combine(run, gathered, combined); });
}

void vocab_xent_totals(Context& ctx, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                       const Tensor& weights, Tensor& lse, Tensor& totals) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "vocab_xent_totals",
                        vocab_xent_totals(ctx, combined, sumexp, labels, weights, lse, totals));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::vocab_xent_totals(run, combined, sumexp, labels, weights, lse, totals);
  });
}

void vocab_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                         const Tensor& labels, const Tensor& weights, int64_t start, float scale,
                         const Tensor& totals, XentNorm norm, Tensor& dlogits) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "vocab_xent_backward",
                        vocab_xent_backward(ctx, logits, lse, labels, weights, start, scale,
                                            totals, norm, dlogits));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::vocab_xent_backward(run, logits, lse, labels, weights, start, scale, totals, norm, dlogits);
  });
}

void softmax_xent_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                          const Tensor& weights, float label_smoothing, Tensor& lse,
                          Tensor& totals) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "softmax_xent_forward",
                        softmax_xent_forward(ctx, logits, labels, weights, label_smoothing,
                                             lse, totals));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::softmax_xent_forward(run, logits, labels, weights, label_smoothing, lse, totals);
  });
}

void softmax_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                           const Tensor& labels, const Tensor& weights, float label_smoothing,
                           float scale, const Tensor& totals, XentNorm norm, Tensor& dlogits) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "softmax_xent_backward",
                        softmax_xent_backward(ctx, logits, lse, labels, weights,
                                              label_smoothing, scale, totals, norm, dlogits));
  run_cpu(ctx, [=](Context& run) mutable {
    cpu::softmax_xent_backward(run, logits, lse, labels, weights, label_smoothing, scale, totals, norm,
                               dlogits);
  });
}

void segment_sum_squares(Context& ctx, const Tensor& a, const Tensor& b,
                         std::span<const TensorSegment> segments, Tensor& sums, const Tensor& a_high) {
  if (on_cuda(ctx)) {
    expect_unsplit("segment_sum_squares", a);
    return KILN_ON_CUDA(ctx, "segment_sum_squares", segment_sum_squares(ctx, a, b, segments, sums));
  }
  run_cpu_segments(ctx, segments, [=](Context& run, std::span<const TensorSegment> segs) mutable {
    cpu::segment_sum_squares(run, a, b, segs, sums, a_high);
  });
}

void scale_all(Context& ctx, Tensor& x, float factor) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "scale_all", scale_all(ctx, x, factor));
  run_cpu(ctx, [=](Context& run) mutable { cpu::scale_all(run, x, factor); });
}

void scale_by_step_scalar(Context& ctx, Tensor& x, const Tensor& scalars, StepScalar slot) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "scale_by_step_scalar", scale_by_step_scalar(ctx, x, scalars, slot));
  run_cpu(ctx, [=](Context& run) mutable { cpu::scale_by_step_scalar(run, x, scalars, slot); });
}

void step_norm_squares(Context& ctx, const Tensor& sums, const Tensor& owners, Tensor& scalars) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "step_norm_squares", step_norm_squares(ctx, sums, owners, scalars));
  run_cpu(ctx, [=](Context& run) mutable { cpu::step_norm_squares(run, sums, owners, scalars); });
}

void step_decide(Context& ctx, Tensor& scalars) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "step_decide", step_decide(ctx, scalars));
  run_cpu(ctx, [=](Context& run) mutable { cpu::step_decide(run, scalars); });
}

void adamw_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& w_compute) {
  if (on_cuda(ctx)) {
    expect_unsplit("adamw_update", w);
    return KILN_ON_CUDA(ctx, "adamw_update", adamw_update(ctx, p, scalars, segments, w, g, m, v, w_compute));
  }
  run_cpu_segments(ctx, segments, [=](Context& run, std::span<const TensorSegment> segs) mutable {
    cpu::adamw_update(run, p, scalars, segs, w, g, m, v, w_compute);
  });
}

void lamb_moments(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  const Tensor& w, const Tensor& w_compute, const Tensor& g, Tensor& m, Tensor& v, Tensor& norms) {
  if (on_cuda(ctx)) {
    expect_unsplit("lamb_moments", w);
    return KILN_ON_CUDA(ctx, "lamb_moments", lamb_moments(ctx, p, scalars, segments, w, g, m, v, norms));
  }
  run_cpu_segments(ctx, segments, [=](Context& run, std::span<const TensorSegment> segs) mutable {
    cpu::lamb_moments(run, p, scalars, segs, w, w_compute, g, m, v, norms);
  });
}

void lamb_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& m, const Tensor& v, Tensor& w_compute) {
  if (on_cuda(ctx)) {
    expect_unsplit("lamb_update", w);
    return KILN_ON_CUDA(ctx, "lamb_update", lamb_update(ctx, p, scalars, segments, norms, w, m, v, w_compute));
  }
  run_cpu_segments(ctx, segments, [=](Context& run, std::span<const TensorSegment> segs) mutable {
    cpu::lamb_update(run, p, scalars, segs, norms, w, m, v, w_compute);
  });
}

void lars_update(Context& ctx, const LarsStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& g, Tensor& momentum, Tensor& w_compute) {
  if (on_cuda(ctx)) {
    expect_unsplit("lars_update", w);
    return KILN_ON_CUDA(ctx, "lars_update", lars_update(ctx, p, scalars, segments, norms, w, g, momentum, w_compute));
  }
  run_cpu_segments(ctx, segments, [=](Context& run, std::span<const TensorSegment> segs) mutable {
    cpu::lars_update(run, p, scalars, segs, norms, w, g, momentum, w_compute);
  });
}

}  // namespace kiln::ops
