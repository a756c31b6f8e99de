// backend/dispatch.cc — the op table's entry points (backend.h): each runs the implementation
// of the context's device, ops::cpu:: (backend/cpu/) or ops::cuda:: (backend/cuda/).
#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/dispatch_cuda.h"

namespace kiln::ops {

#ifdef KILN_HAVE_CUDA
namespace {
[[maybe_unused]] const bool kCudaRegistered = (cuda::register_backend(), true);
}  // namespace
#endif

void fill(Context& ctx, Tensor& t, float value) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "fill", fill(ctx, t, value));
  cpu::fill(ctx, t, value);
}

void copy(Context& ctx, const Tensor& src, Tensor& dst) {
#ifdef KILN_HAVE_CUDA
  if (!src.device.cpu_kernels() || !dst.device.cpu_kernels()) return cuda::copy(ctx, src, dst);
#endif
  cpu::copy(ctx, src, dst);
}

void cast(Context& ctx, const Tensor& src, Tensor& dst) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "cast", cast(ctx, src, dst));
  cpu::cast(ctx, src, dst);
}

void matmul(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
            const MatmulOpts& opts) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "matmul", matmul(ctx, a, b, c, opts));
  cpu::matmul(ctx, a, b, c, opts);
}

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "add", add(ctx, a, b, out));
  cpu::add(ctx, a, b, out);
}

void scale(Context& ctx, const Tensor& x, float s, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "scale", scale(ctx, x, s, y));
  cpu::scale(ctx, x, s, y);
}

void bias_add(Context& ctx, Tensor& y, const Tensor& bias) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "bias_add", bias_add(ctx, y, bias));
  cpu::bias_add(ctx, y, bias);
}

void bias_grad(Context& ctx, const Tensor& dy, Tensor& db) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "bias_grad", bias_grad(ctx, dy, db));
  cpu::bias_grad(ctx, dy, db);
}

void gelu_forward(Context& ctx, GeluKind kind, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "gelu_forward", gelu_forward(ctx, kind, x, y));
  cpu::gelu_forward(ctx, kind, x, y);
}

void gelu_backward(Context& ctx, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "gelu_backward", gelu_backward(ctx, kind, x, dy, dx));
  cpu::gelu_backward(ctx, kind, x, dy, dx);
}

void tanh_forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "tanh_forward", tanh_forward(ctx, x, y));
  cpu::tanh_forward(ctx, x, y);
}

void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "tanh_backward", tanh_backward(ctx, y, dy, dx));
  cpu::tanh_backward(ctx, y, dy, dx);
}

void dropout_forward(Context& ctx, const Tensor& x, float p, const RngStream& rng,
                     uint64_t sample_offset, int64_t samples, Tensor& y, int64_t element_offset) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "dropout_forward",
                        dropout_forward(ctx, x, p, rng, sample_offset, samples, y, element_offset));
  cpu::dropout_forward(ctx, x, p, rng, sample_offset, samples, y, element_offset);
}

void dropout_backward(Context& ctx, const Tensor& dy, float p, const RngStream& rng,
                      uint64_t sample_offset, int64_t samples, Tensor& dx, int64_t element_offset) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "dropout_backward",
                        dropout_backward(ctx, dy, p, rng, sample_offset, samples, dx, element_offset));
  cpu::dropout_backward(ctx, dy, p, rng, sample_offset, samples, dx, element_offset);
}

void layernorm_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "layernorm_forward",
                        layernorm_forward(ctx, x, w, b, eps, y, mean, rstd));
  cpu::layernorm_forward(ctx, x, w, b, eps, y, mean, rstd);
}

void layernorm_backward(Context& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw,
                        Tensor& db, bool accumulate_dx) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "layernorm_backward",
                        layernorm_backward(ctx, dy, x, w, mean, rstd, dx, dw, db, accumulate_dx));
  cpu::layernorm_backward(ctx, dy, x, w, mean, rstd, dx, dw, db, accumulate_dx);
}

void softmax_forward(Context& ctx, const Tensor& x, Tensor& y) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "softmax_forward", softmax_forward(ctx, x, y));
  cpu::softmax_forward(ctx, x, y);
}

void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, float scale, Tensor& dx) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "softmax_backward",
                        softmax_backward(ctx, y, dy, scale, dx));
  cpu::softmax_backward(ctx, y, dy, scale, dx);
}

void attention_softmax_forward(Context& ctx, const Tensor& scores, const Tensor& mask,
                               Tensor& probs) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "attention_softmax_forward",
                        attention_softmax_forward(ctx, scores, mask, probs));
  cpu::attention_softmax_forward(ctx, scores, mask, probs);
}

void gather_rows(Context& ctx, const Tensor& table, const Tensor& ids, Tensor& out, int64_t first) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "gather_rows", gather_rows(ctx, table, ids, out, first));
  cpu::gather_rows(ctx, table, ids, out, first);
}

void scatter_add_rows(Context& ctx, const Tensor& dy, const Tensor& ids, Tensor& dtable, int64_t first) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "scatter_add_rows", scatter_add_rows(ctx, dy, ids, dtable, first));
  cpu::scatter_add_rows(ctx, dy, ids, dtable, first);
}

void vocab_xent_partials(Context& ctx, const Tensor& logits, const Tensor& labels, int64_t start,
                         Tensor& partials) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "vocab_xent_partials",
                        vocab_xent_partials(ctx, logits, labels, start, partials));
  cpu::vocab_xent_partials(ctx, logits, labels, start, partials);
}

void vocab_xent_sumexp(Context& ctx, const Tensor& logits, const Tensor& max, Tensor& sumexp) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "vocab_xent_sumexp",
                        vocab_xent_sumexp(ctx, logits, max, sumexp));
  cpu::vocab_xent_sumexp(ctx, logits, max, sumexp);
}

void vocab_xent_combine(Context& ctx, const Tensor& gathered, Tensor& combined) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "vocab_xent_combine", vocab_xent_combine(ctx, gathered, combined));
  cpu::vocab_xent_combine(ctx, gathered, combined);
}

void vocab_xent_totals(Context& ctx, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                       const Tensor& weights, Tensor& lse, Tensor& totals) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "vocab_xent_totals",
                        vocab_xent_totals(ctx, combined, sumexp, labels, weights, lse, totals));
  cpu::vocab_xent_totals(ctx, combined, sumexp, labels, weights, lse, totals);
}

void vocab_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                         const Tensor& labels, const Tensor& weights, int64_t start, float scale,
                         double norm, Tensor& dlogits) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "vocab_xent_backward",
                        vocab_xent_backward(ctx, logits, lse, labels, weights, start, scale,
                                            norm, dlogits));
  cpu::vocab_xent_backward(ctx, logits, lse, labels, weights, start, scale, norm, dlogits);
}

void softmax_xent_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                          const Tensor& weights, float label_smoothing, Tensor& lse,
                          Tensor& totals) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "softmax_xent_forward",
                        softmax_xent_forward(ctx, logits, labels, weights, label_smoothing,
                                             lse, totals));
  cpu::softmax_xent_forward(ctx, logits, labels, weights, label_smoothing, lse, totals);
}

void softmax_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                           const Tensor& labels, const Tensor& weights, float label_smoothing,
                           float scale, double norm, Tensor& dlogits) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "softmax_xent_backward",
                        softmax_xent_backward(ctx, logits, lse, labels, weights,
                                              label_smoothing, scale, norm, dlogits));
  cpu::softmax_xent_backward(ctx, logits, lse, labels, weights, label_smoothing, scale, norm,
                             dlogits);
}

void segment_sum_squares(Context& ctx, const Tensor& a, const Tensor& b,
                         std::span<const TensorSegment> segments, Tensor& sums) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "segment_sum_squares",
                        segment_sum_squares(ctx, a, b, segments, sums));
  cpu::segment_sum_squares(ctx, a, b, segments, sums);
}

void scale_all(Context& ctx, Tensor& x, float factor) {
  if (on_cuda(ctx)) return KILN_ON_CUDA(ctx, "scale_all", scale_all(ctx, x, factor));
  cpu::scale_all(ctx, x, factor);
}

void scale_check_finite(Context& ctx, Tensor& x, float factor, Tensor& found) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "scale_check_finite",
                        scale_check_finite(ctx, x, factor, found));
  cpu::scale_check_finite(ctx, x, factor, found);
}

void adamw_update(Context& ctx, const AdamStep& p, std::span<const TensorSegment> segments,
                  Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& w_compute) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "adamw_update",
                        adamw_update(ctx, p, segments, w, g, m, v, w_compute));
  cpu::adamw_update(ctx, p, segments, w, g, m, v, w_compute);
}

void lamb_moments(Context& ctx, const AdamStep& p, std::span<const TensorSegment> segments,
                  const Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& norms) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "lamb_moments",
                        lamb_moments(ctx, p, segments, w, g, m, v, norms));
  cpu::lamb_moments(ctx, p, segments, w, g, m, v, norms);
}

void lamb_update(Context& ctx, const AdamStep& p, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& m, const Tensor& v,
                 Tensor& w_compute) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "lamb_update",
                        lamb_update(ctx, p, segments, norms, w, m, v, w_compute));
  cpu::lamb_update(ctx, p, segments, norms, w, m, v, w_compute);
}

void lars_update(Context& ctx, const LarsStep& p, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& g, Tensor& momentum,
                 Tensor& w_compute) {
  if (on_cuda(ctx))
    return KILN_ON_CUDA(ctx, "lars_update",
                        lars_update(ctx, p, segments, norms, w, g, momentum, w_compute));
  cpu::lars_update(ctx, p, segments, norms, w, g, momentum, w_compute);
}

}  // namespace kiln::ops
