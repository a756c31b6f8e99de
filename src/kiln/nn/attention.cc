#include "kiln/nn/attention.h"

#include <cmath>
#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/nn/sequence_parallel.h"
#include "kiln/core/error.h"

namespace kiln::nn {
namespace {

// The stride, in elements, at which t[1] and t[2] follow t[0] in memory (the flat parameter
// buffers: q, k and v register their weights, and their biases, one after another), else 0.
int64_t stride_of(const Tensor (&t)[3]) {
  if (!t[0].defined() || !t[1].defined() || !t[2].defined() || t[0].dtype != t[1].dtype || t[1].dtype != t[2].dtype)
    return 0;
  const auto at = [&](int i) { return reinterpret_cast<uintptr_t>(t[i].data); };
  const uintptr_t bytes = at(1) - at(0), size = dtype_size(t[0].dtype);
  const bool uniform = at(1) > at(0) && at(2) - at(1) == bytes && bytes % size == 0 &&
                       int64_t(bytes / size) >= t[0].numel();
  return uniform ? int64_t(bytes / size) : 0;
}

// n elements from t's first on (the memory after t: the caller knows it is there).
Tensor span_from(const Tensor& t, int64_t n) { return Tensor::view(t.data, {n}, t.dtype, t.device); }

// Three matrices, `stride` elements apart from `first` on (stride_of's; q, k and v's rows of one
// buffer), as one view batched over them.
ops::MatView three_at_stride(const Tensor& first, int64_t stride, bool trans = false) {
  ops::MatView v = ops::mat(first, trans);
  v.t = span_from(first, 2 * stride + first.numel());
  v.batch[0] = 3, v.batch_stride[0] = stride;
  return v;
}

// The same matrix for each of three batches (batch stride 0).
ops::MatView same_for_three(const Tensor& x, bool trans = false) {
  ops::MatView v = ops::mat(x, trans);
  v.batch[0] = 3;
  return v;
}

}  // namespace

SelfAttention::SelfAttention(ParamStore& store, const std::string& prefix, int64_t hidden,
                             int64_t heads, float attn_dropout, uint32_t layer_id,
                             AttentionBuffers* recompute, const TensorParallel& tp)
    : query(store, prefix + ".query", hidden, hidden, Split::column, tp),
      key(store, prefix + ".key", hidden, hidden, Split::column, tp),
      value(store, prefix + ".value", hidden, hidden, Split::column, tp),
      hidden(hidden),
      heads(tp.share(heads, "attention heads")),
      head_dim(hidden / heads),
      width(this->heads * head_dim),
      dropout_(attn_dropout, layer_id),
      core_(recompute ? recompute : &own_),
      recompute_(recompute != nullptr),
      first_head_(tp.start(heads)),
      tp_(tp) {
  KILN_CHECK(heads > 0 && hidden % heads == 0, "{}: hidden size {} is not a multiple of {} heads",
             prefix, hidden, heads);
  // q, k and v read the same x: their dx shares are summed over the group once.
  query.reduce_input_grad = key.reduce_input_grad = value.reduce_input_grad = false;
}

Tensor SelfAttention::forward(const Step& step, const Tensor& x, const Tensor& mask) {
  KILN_CHECK(mask.rank() == 2 && mask.dtype == DType::i32,
             "SelfAttention {}: mask {} {} is not (B, S) i32", query.weight.spec().name,
             dtype_name(mask.dtype), shape_str(mask.shape));
  const int64_t B = mask.dim(0), S = mask.dim(1);
  const int64_t rows = tp_.sequence ? tp_.sequence->local_rows() : B * S;
  KILN_CHECK(x.rank() == 2 && x.dim(0) == rows && x.dim(1) == hidden,
             "SelfAttention {}: input {} is not ({}, {})", query.weight.spec().name, shape_str(x.shape), rows, hidden);
  Context& ctx = *step.ctx;
  B_ = B;
  S_ = S;
  mask_ = mask;
  x_rows_ = x;
  const Tensor whole = tp_.sequence ? tp_.sequence->gather(ctx, x, gathered_.buffer()) : x;  // (B*S, hidden)
  if (!project_together(step, whole)) {
    q_ = query.forward(step, whole);
    k_ = key.forward(step, whole);
    v_ = value.forward(step, whole);
  }
  Tensor context = ctx_.get(*step.ctx, {B * S, width}, x.dtype);  // dropped probs v, head by head
  fused_ = takes_fused(ctx, x.dtype);
  if (fused_) {
    fused_forward(step, context);
    return context;
  }
  core_forward(step, true);
  ops::matmul(ctx, ops::per_head(dropped_), ops::heads_view(v_, B, S, heads),
              ops::heads_view(context, B, S, heads));
  return context;
}

bool SelfAttention::project_together(const Step& step, const Tensor& x) {
  const DType dt = x.dtype;
  const Tensor w[3] = {query.weight_for(dt), key.weight_for(dt), value.weight_for(dt)};  // (width, hidden)
  const Tensor b[3] = {query.bias_for(dt), key.bias_for(dt), value.bias_for(dt)};        // (width)
  const int64_t w_stride = stride_of(w), b_stride = stride_of(b);
  if (w_stride == 0 || b_stride == 0) return false;
  const int64_t N = x.dim(0);
  Tensor qkv = qkv_.get(*step.ctx, {3 * N, width}, dt);
  const Tensor biases = span_from(b[0], 2 * b_stride + width);
  ops::MatmulOpts o;
  o.bias = &biases;
  o.bias_batch_stride = b_stride;
  ops::matmul(*step.ctx, same_for_three(x), three_at_stride(w[0], w_stride, true),
              three_at_stride(qkv.slice_rows(0, N), N * width), o);
  q_ = qkv.slice_rows(0, N), k_ = qkv.slice_rows(N, 2 * N), v_ = qkv.slice_rows(2 * N, 3 * N);
  for (Linear* l : {&query, &key, &value}) l->keep_input(x);
  return true;
}

bool SelfAttention::takes_fused(const Context& ctx, DType dtype) const {
  return chosen_core(core, ctx.device.kind == DeviceKind::cuda, dtype, head_dim) == AttentionCore::fused;
}

void SelfAttention::fused_forward(const Step& step, Tensor& context) {
  const int64_t B = B_, S = S_;
  dropout_.element_offset = first_head_ * S * S;
  dropout_on_ = dropout_.arm(step, B);
  context_ = context;
  lse_ = own_lse_.get(*step.ctx, {B, heads, S}, DType::f32);
  keep_ = dropout_on_ ? own_keep_.get(*step.ctx, {B, heads, S, ops::flash_keep_words(S)}, DType::i32) : Tensor{};
  ops::flash_attention_forward(*step.ctx, ops::heads_view(q_, B, S, heads), ops::heads_view(k_, B, S, heads),
                               ops::heads_view(v_, B, S, heads), mask_, probs_dropout(),
                               1.0f / std::sqrt(float(head_dim)), ops::heads_view(context, B, S, heads), lse_, keep_);
}

void SelfAttention::fused_backward(const Step& step, const Tensor& dctx, Tensor& dq, Tensor& dk, Tensor& dv) {
  const int64_t B = B_, S = S_;
  const auto heads_of = [&](const Tensor& t) { return ops::heads_view(t, B, S, heads); };
  dropout_on_ = dropout_.arm(step, B);  // the forward's p (its mask is in keep_)
  ops::flash_attention_backward(*step.ctx, heads_of(q_), heads_of(k_), heads_of(v_), heads_of(context_),
                                heads_of(dctx), mask_, probs_dropout(), 1.0f / std::sqrt(float(head_dim)), lse_, keep_,
                                heads_of(dq), heads_of(dk), heads_of(dv));
}

void SelfAttention::core_forward(const Step& step, bool with_dropped) {
  // probs (B, heads, S, S) = softmax(q k^T / sqrt(d) + key bias); scores in f32, probs in the
  // compute dtype (the same buffer when that is f32).
  const int64_t B = B_, S = S_;
  Context& ctx = *step.ctx;
  // f32 probabilities are the scores' own buffer, softmax'ed in place; lower-precision ones are kept
  // and the scores are scratch.
  const bool low = q_.dtype != DType::f32;
  Tensor scores = (low ? scratch_->f32 : core_->scores).get(*step.ctx, {B, heads, S, S}, DType::f32);
  ops::MatmulOpts o;
  o.alpha = 1.0f / std::sqrt(float(head_dim));
  ops::matmul(ctx, ops::heads_view(q_, B, S, heads), ops::heads_view(k_, B, S, heads, true),
              ops::per_head(scores), o);
  probs_ = low ? core_->probs.get(*step.ctx, {B, heads, S, S}, q_.dtype) : scores;
  dropout_.element_offset = first_head_ * S * S;
  dropout_on_ = dropout_.arm(step, B);
  if (dropout_on_ && with_dropped) {
    dropped_ = scratch_->dropped.get(*step.ctx, {B, heads, S, S}, q_.dtype);
    ops::attention_probs_forward(ctx, scores, mask_, dropout_.mask(), probs_, dropped_);
    return;
  }
  ops::attention_softmax_forward(ctx, scores, mask_, probs_);
  dropped_ = probs_;
}

void SelfAttention::share_scratch(AttentionScratch& scratch) {
  scratch_ = &scratch;
}

void SelfAttention::share_storage(SelfAttention& owner) {
  query.share_storage(owner.query), key.share_storage(owner.key), value.share_storage(owner.value);
  dropout_.share_storage(owner.dropout_);
  own_.scores.share(owner.own_.scores), own_.probs.share(owner.own_.probs);
  AttentionScratch &mine = own_scratch_, &theirs = owner.own_scratch_;
  mine.f32.share(theirs.f32), mine.dropped.share(theirs.dropped), mine.dqkv.share(theirs.dqkv);
  mine.dx.share(theirs.dx);
  ctx_.share(owner.ctx_), own_lse_.share(owner.own_lse_), own_keep_.share(owner.own_keep_);
  partial_dx_.share_own(owner.partial_dx_);
  qkv_.share(owner.qkv_);
  gathered_.share_own(owner.gathered_), scattered_.share_own(owner.scattered_);
}

void SelfAttention::unfused_backward(const Step& step, const Tensor& dctx, Tensor& dq, Tensor& dk, Tensor& dv) {
  const int64_t B = B_, S = S_;
  Context& ctx = *step.ctx;
  const DType dt = dctx.dtype;
  if (recompute_) core_forward(step, false);  // the shared buffers hold another layer's core
  const auto heads_of = [&](const Tensor& t, bool trans = false) {
    return ops::heads_view(t, B, S, heads, trans);
  };
  const float scale = 1.0f / std::sqrt(float(head_dim));

  // d(dropped) = dctx v^T (f32), then d(q k^T) = softmax'(dropout'(d(dropped))) / sqrt(d) in the
  // compute dtype: over d(dropped) when that is f32. Else, with dropout, over the probabilities,
  // which nothing reads after this (the same op remakes the dropped ones for dv); without, dv
  // still reads them: over the dropout's scratch.
  Tensor dprobs = scratch_->f32.get(*step.ctx, {B, heads, S, S}, DType::f32);
  ops::matmul(ctx, heads_of(dctx), heads_of(v_, true), ops::per_head(dprobs));
  Tensor dscores = dt == DType::f32 ? dprobs
                   : dropout_on_      ? probs_
                                      : scratch_->dropped.get(*step.ctx, {B, heads, S, S}, dt);
  if (dropout_on_) {
    dropped_ = scratch_->dropped.get(*step.ctx, {B, heads, S, S}, dt);
    ops::attention_probs_backward(ctx, probs_, dprobs, dropout_.mask(), scale, dscores, dropped_);
  } else {
    ops::softmax_backward(ctx, probs_, dprobs, scale, dscores);
  }
  // dv = dropped^T dctx
  ops::matmul(ctx, ops::per_head(dropped_, true), heads_of(dctx), heads_of(dv));
  ops::matmul(ctx, ops::per_head(dscores), heads_of(k_), heads_of(dq));
  ops::matmul(ctx, ops::per_head(dscores, true), heads_of(q_), heads_of(dk));
}

Tensor SelfAttention::backward(const Step& step, const Tensor& dctx) {
  const int64_t rows = tp_.sequence ? tp_.sequence->local_rows() : B_ * S_;
  Tensor dx = scratch_->dx.get(*step.ctx, {rows, hidden}, dctx.dtype);
  backward_into(step, dctx, dx, false);
  return dx;
}

void SelfAttention::backward_into(const Step& step, const Tensor& dctx, Tensor& dx,
                                  bool accumulate) {
  const int64_t B = B_, S = S_;
  KILN_CHECK(dctx.rank() == 2 && dctx.dim(0) == B * S && dctx.dim(1) == width &&
                 dctx.dtype == q_.dtype,
             "SelfAttention {}: gradient {} {} is not ({}, {}) {}", query.weight.spec().name,
             dtype_name(dctx.dtype), shape_str(dctx.shape), B * S, width, dtype_name(q_.dtype));
  Context& ctx = *step.ctx;
  const DType dt = dctx.dtype;
  const int64_t N = B * S;
  const Tensor dqkv = scratch_->dqkv.get(*step.ctx, {3 * N, width}, dt);
  Tensor dq = dqkv.slice_rows(0, N), dk = dqkv.slice_rows(N, 2 * N), dv = dqkv.slice_rows(2 * N, 3 * N);
  if (fused_) fused_backward(step, dctx, dq, dk, dv);
  else unfused_backward(step, dctx, dq, dk, dv);
  if (tp_.sequence) tp_.sequence->gather(ctx, x_rows_, gathered_.buffer());  // the whole input again, for dW
  projection_grads(step, dqkv);
  if (!tp_.split()) {
    query.input_grad_into(step, dq, dx, accumulate);
    key.input_grad_into(step, dk, dx, true);
    value.input_grad_into(step, dv, dx, true);
    return;
  }
  Tensor part = partial_dx_.get(*step.ctx, {N, hidden}, dt);
  query.input_grad_into(step, dq, part, false);
  key.input_grad_into(step, dk, part, true);
  value.input_grad_into(step, dv, part, true);
  if (tp_.sequence) part = tp_.sequence->scatter_sum(ctx, part, scattered_.buffer());  // this rank's rows of the sum
  else tp_.all_reduce(part);
  if (accumulate) ops::add(ctx, dx, part, dx);
  else ops::copy(ctx, part, dx);
}

void SelfAttention::projection_grads(const Step& step, const Tensor& dqkv) {
  Linear* layers[3] = {&query, &key, &value};
  const Param::GradTarget dw[3] = {query.weight.grad_for_write(), key.weight.grad_for_write(),
                                   value.weight.grad_for_write()};
  if (grads_together(step, dqkv, dw)) return;
  const int64_t N = dqkv.dim(0) / 3;
  for (int64_t i = 0; i < 3; ++i) layers[i]->weight_grads(step, dqkv.slice_rows(i * N, (i + 1) * N), dw[i]);
}

bool SelfAttention::grads_together(const Step& step, const Tensor& dqkv, const Param::GradTarget (&dw)[3]) {
  const Tensor w[3] = {dw[0].grad, dw[1].grad, dw[2].grad};  // (width, hidden) f32
  const int64_t w_stride = stride_of(w);
  if (w_stride == 0 || dw[0].accumulate != dw[1].accumulate || dw[1].accumulate != dw[2].accumulate) return false;
  const Tensor db[3] = {query.bias.grad(), key.bias.grad(), value.bias.grad()};  // (width) f32, zero-filled if new
  const int64_t b_stride = stride_of(db);
  if (b_stride == 0) return false;
  const Tensor& x = query.kept_input();  // (N, hidden): the same for the three
  const int64_t N = x.dim(0);
  KILN_CHECK(dqkv.dim(0) == 3 * N && key.kept_input().data == x.data && value.kept_input().data == x.data,
             "SelfAttention {}: q, k and v's gradients {} are not of their one input {}", query.weight.spec().name,
             shape_str(dqkv.shape), shape_str(x.shape));
  Tensor biases = span_from(db[0], 2 * b_stride + width);
  ops::MatmulOpts o;
  o.beta = dw[0].accumulate ? 1.0f : 0.0f;
  o.bias_grad = &biases;
  o.bias_batch_stride = b_stride;
  ops::matmul(*step.ctx, three_at_stride(dqkv.slice_rows(0, N), N * width, true), same_for_three(x),
              three_at_stride(w[0], w_stride), o);
  return true;
}

}  // namespace kiln::nn
