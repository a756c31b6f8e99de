// backend/cpu/cpu_ops.h — the CPU implementations of the op table (backend/backend.h has the
// contracts and the defaults); backend/dispatch.cc calls them for CPU contexts.
#pragma once
#include "kiln/backend/backend.h"

namespace kiln::ops::cpu {

void fill(Context& ctx, Tensor& t, float value);
void copy(Context& ctx, const Tensor& src, Tensor& dst);
void cast(Context& ctx, const Tensor& src, Tensor& dst);
void split_master(Context& ctx, const Tensor& w, Tensor& high, Tensor& low);
void join_master(Context& ctx, const Tensor& high, const Tensor& low, Tensor& w);
void matmul(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
            const MatmulOpts& opts);
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
void scale(Context& ctx, const Tensor& x, float s, Tensor& y);
void bias_add(Context& ctx, Tensor& y, const Tensor& bias);
void bias_grad(Context& ctx, const Tensor& dy, Tensor& db);
void gelu_forward(Context& ctx, GeluKind kind, const Tensor& x, Tensor& y);
void gelu_backward(Context& ctx, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx);
void tanh_forward(Context& ctx, const Tensor& x, Tensor& y);
void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
void dropout_forward(Context& ctx, const Tensor& x, const DropoutMask& mask, Tensor& y);
void dropout_backward(Context& ctx, const Tensor& dy, const DropoutMask& mask, Tensor& dx);
void layernorm_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps, Tensor& y, Tensor& mean, Tensor& rstd);
void add_layernorm_forward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& w,
                           const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd);
void layernorm_backward(Context& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dw,
                        Tensor& db, bool accumulate_dx);
void softmax_forward(Context& ctx, const Tensor& x, Tensor& y);
void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, float scale, Tensor& dx);
void attention_softmax_forward(Context& ctx, const Tensor& scores, const Tensor& mask,
                               Tensor& probs);
void attention_probs_forward(Context& ctx, const Tensor& scores, const Tensor& mask, const DropoutMask& drop,
                             Tensor& probs, Tensor& dropped);
void attention_probs_backward(Context& ctx, const Tensor& probs, Tensor& dprobs, const DropoutMask& drop,
                              float scale, Tensor& dscores, Tensor& dropped);
void gather_rows(Context& ctx, const Tensor& table, const Tensor& ids, Tensor& out, int64_t first);
void scatter_add_rows(Context& ctx, const Tensor& dy, const Tensor& ids, Tensor& dtable, int64_t first);
void vocab_xent_partials(Context& ctx, const Tensor& logits, const Tensor& labels, int64_t start,
                         Tensor& partials);
void vocab_xent_sumexp(Context& ctx, const Tensor& logits, const Tensor& max, Tensor& sumexp);
void vocab_xent_combine(Context& ctx, const Tensor& gathered, Tensor& combined);
void vocab_xent_totals(Context& ctx, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                       const Tensor& weights, Tensor& lse, Tensor& totals);
void vocab_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                         const Tensor& labels, const Tensor& weights, int64_t start, float scale,
                         const Tensor& totals, XentNorm norm, Tensor& dlogits);
void softmax_xent_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                          const Tensor& weights, float label_smoothing, Tensor& lse,
                          Tensor& totals);
void softmax_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                           const Tensor& labels, const Tensor& weights, float label_smoothing,
                           float scale, const Tensor& totals, XentNorm norm, Tensor& dlogits);
void segment_sum_squares(Context& ctx, const Tensor& a, const Tensor& b,
                         std::span<const TensorSegment> segments, Tensor& sums, const Tensor& a_high);
void scale_all(Context& ctx, Tensor& x, float factor);
void scale_by_step_scalar(Context& ctx, Tensor& x, const Tensor& scalars, StepScalar slot);
void step_norm_squares(Context& ctx, const Tensor& sums, const Tensor& owners, Tensor& scalars);
void step_decide(Context& ctx, Tensor& scalars);
void adamw_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& w_compute);
void lamb_moments(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  const Tensor& w, const Tensor& w_compute, const Tensor& g, Tensor& m, Tensor& v, Tensor& norms);
void lamb_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& m, const Tensor& v, Tensor& w_compute);
void lars_update(Context& ctx, const LarsStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& g, Tensor& momentum, Tensor& w_compute);
void conv2d_forward(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& w,
                    Tensor& y);
void conv2d_backward_data(Context& ctx, const ConvShape& s, const Tensor& dy, const Tensor& w,
                          Tensor& dx);
void conv2d_backward_weights(Context& ctx, const ConvShape& s, const Tensor& x, const Tensor& dy,
                             Tensor& dw, bool accumulate);
bool conv2d_native(DType dtype);
ConvScratch conv2d_scratch_bytes(const ConvShape& s, DType dtype, bool accumulate);
void batchnorm_train_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, float eps, bool relu, Tensor& y, Tensor& mean,
                             Tensor& var, const Tensor& residual);
void batchnorm_eval_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& var, float eps,
                            bool relu, Tensor& y, const Tensor& residual);
void batchnorm_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps,
                        bool relu, bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta);
void batchnorm_channel_sums(Context& ctx, const Tensor& x, Tensor& sum);
void batchnorm_channel_deviations(Context& ctx, const Tensor& x, const Tensor& sum, int64_t total_rows,
                                  Tensor& squares);
void batchnorm_stats_from_sums(Context& ctx, const Tensor& sum, const Tensor& squares, int64_t rows, Tensor& mean,
                               Tensor& var);
void batchnorm_backward_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& mean,
                             bool relu, Tensor& sums);
void batchnorm_backward_from_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                                  const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps, bool relu,
                                  const Tensor& local_sums, const Tensor& global_sums, int64_t total_rows, Tensor& dx,
                                  Tensor& dgamma, Tensor& dbeta);
void batchnorm_update_running(Context& ctx, const Tensor& mean, const Tensor& var, int64_t rows,
                              float momentum, Tensor& running_mean, Tensor& running_var,
                              Tensor& num_batches_tracked);
void maxpool_forward(Context& ctx, const PoolShape& s, const Tensor& x, Tensor& y,
                     Tensor& argmax);
void maxpool_backward(Context& ctx, const PoolShape& s, const Tensor& dy, const Tensor& argmax,
                      Tensor& dx);
void global_avgpool_forward(Context& ctx, const Tensor& x, Tensor& y);
void global_avgpool_backward(Context& ctx, const Tensor& dy, Tensor& dx);
void relu_forward(Context& ctx, const Tensor& x, Tensor& y);
void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, const Tensor& dy2);
void residual_add(Context& ctx, const Tensor& x, Tensor& y);

}  // namespace kiln::ops::cpu
