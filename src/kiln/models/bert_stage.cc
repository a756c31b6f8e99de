#include "kiln/models/bert_stage.h"

#include <string>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/core/hd.h"

namespace kiln::models {
namespace {

const char* const kWord = "bert.embeddings.word_embeddings.weight";

// A host i32 tensor over a batch vector (read by the ops during the step).
// Host ids as an operand on the step's device (nn::Buffer::input).
Tensor ids_input(Context& ctx, nn::Buffer& buffer, const std::vector<int32_t>& v, Shape shape) {
  return buffer.input(ctx, Tensor::view(const_cast<int32_t*>(v.data()), std::move(shape), DType::i32));
}

// The tensor in f32: itself, or its cast into `buffer`.
Tensor as_f32(Context& ctx, const Tensor& t, nn::Buffer& buffer) {
  if (t.dtype == DType::f32) return t;
  Tensor f = buffer.get(ctx, t.shape);
  ops::cast(ctx, t, f);
  return f;
}

}  // namespace

StageRange bert_stage_range(const BertConfig& config, int stage, int stages) {
  KILN_CHECK(stages > 0 && stage >= 0 && stage < stages, "pipeline stage {} of {} does not exist", stage, stages);
  KILN_CHECK(config.layers % stages == 0,
             "--pipeline-model-parallel-size {}: model.num_layers {} is not a multiple of it", stages,
             config.layers);
  const int64_t per = config.layers / stages;
  return {stage * per, (stage + 1) * per, stage == 0, stage == stages - 1};
}

BertStage::BertStage(const BertConfig& config, const StageRange& range, ParamStore& store,
                     const nn::TensorParallel& tp)
    : config_(config),
      range_(range),
      store_(store),
      tp_(tp),
      embedding_dropout_(config.hidden_dropout, 0),
      vocab_mlm_loss_(tp) {
  const BertConfig& c = config;
  KILN_CHECK(c.hidden > 0 && c.heads > 0 && c.hidden % c.heads == 0,
             "BERT config: hidden {} must be a positive multiple of heads {}", c.hidden, c.heads);
  KILN_CHECK(c.layers > 0 && c.layers < 16000, "BERT config: layers {} out of range", c.layers);
  if (c.sequence_parallel && tp.split()) {
    sequence_.emplace(tp);
    tp_.sequence = &*sequence_;
  }
  vocab_rows_ = tp.share(c.vocab_size, "vocabulary");
  vocab_start_ = tp.start(c.vocab_size);
  if (range.first) add_embeddings(store);
  else if (range.last) decoder_weight_ = add_decoder_copy(c, store, tp);
  for (int64_t n = range.first_layer; n < range.end_layer; ++n) {
    layers_.push_back(std::make_unique<nn::TransformerLayer>(
        store, "bert.encoder.layer." + std::to_string(n), c.hidden, c.heads, c.intermediate,
        c.hidden_dropout, c.attention_dropout, c.pre_ln, c.pre_ln ? nn::GeluKind::tanh : nn::GeluKind::erf,
        uint32_t(n), c.recompute_attention ? &shared_attention_ : nullptr, tp_));
    // The layers take eps from their own defaults; BERT's is 1e-12, the config may differ.
    layers_.back()->attention_norm.eps = c.layer_norm_eps;
    layers_.back()->output_norm.eps = c.layer_norm_eps;
    layers_.back()->attention.core = c.attention_core;
    layers_.back()->share_buffers(shared_layers_, int(layers_.size() % 2));
  }
  recompute_ = recompute_layout(c, int64_t(layers_.size()));
  for (size_t n = 0; n < layers_.size(); ++n)
    if (recompute_.storage_of[n] != int64_t(n)) layers_[n]->share_storage(*layers_[size_t(recompute_.storage_of[n])]);
  input_copies_.resize(layers_.size());
  layer_input_.resize(layers_.size());
  if (range.last) add_heads(store);
  if (tp.rank > 0)  // replicated parameters count on tp rank 0
    for (size_t id = 0; id < store.specs().size(); ++id)
      if (store.specs()[id].part_dim < 0) store.set_norm_owner(int(id), false);
}

void BertStage::add_embeddings(ParamStore& store) {
  const BertConfig& c = config_;
  if (tp_.split()) word_.emplace(store, kWord, c.vocab_size, c.hidden, tp_);
  else word_.emplace(store, kWord, c.vocab_size, c.hidden);
  position_.emplace(store, "bert.embeddings.position_embeddings.weight", c.max_position, c.hidden);
  token_type_.emplace(store, "bert.embeddings.token_type_embeddings.weight", c.type_vocab, c.hidden);
  if (!c.pre_ln) embedding_norm_.emplace(store, "bert.embeddings.LayerNorm", c.hidden, c.layer_norm_eps);
}

// In Hugging Face's order.
void BertStage::add_heads(ParamStore& store) {
  const BertConfig& c = config_;
  const int64_t V = c.vocab_size;
  if (c.pre_ln) final_norm_.emplace(store, "bert.encoder.LayerNorm", c.hidden, c.layer_norm_eps);
  if (c.binary_head) pooler_.emplace(store, "bert.pooler.dense", c.hidden, c.hidden);
  transform_.emplace(store, "cls.predictions.transform.dense", c.hidden, c.hidden);
  transform_norm_.emplace(store, "cls.predictions.transform.LayerNorm", c.hidden, c.layer_norm_eps);
  decoder_bias_ = tp_.split() ? store.add_part("cls.predictions.bias", {V}, false, 0, vocab_start_, vocab_rows_)
                              : store.add("cls.predictions.bias", {V}, false);
  if (c.binary_head) seq_relationship_.emplace(store, "cls.seq_relationship", c.hidden, 2);
  if (range_.first) decoder_weight_ = word_->weight;
}

Param BertStage::add_decoder_copy(const BertConfig& config, ParamStore& store, const nn::TensorParallel& tp) {
  const int64_t V = config.vocab_size;
  const Param copy = tp.split() ? store.add_part(kWord, {V, config.hidden}, true, 0, tp.start(V), tp.share(V, "vocabulary"))
                                : store.add(kWord, {V, config.hidden}, true);
  store.set_norm_owner(copy.id, false);  // the first stage counts it
  return copy;
}

int64_t BertStage::boundary_rows(int64_t B, int64_t S) const {
  return sequence_ ? B * S / tp_.size : B * S;
}

const Param* BertStage::word_embedding() const {
  return range_.first ? &word_->weight : range_.last ? &decoder_weight_ : nullptr;
}

// The host's part of forward: sizes, the rows the ops read, and every copy to the device.
void BertStage::stage(const Step& step, const data::BertBatch& batch) {
  check_bert_batch(batch, config_);
  KILN_CHECK(step.compute_dtype == store_.compute_dtype(),
             "BERT: the step computes in {} but the weights' compute copy is {}",
             dtype_name(step.compute_dtype), dtype_name(store_.compute_dtype()));
  Context& ctx = *step.ctx;
  ctx_ = &ctx;
  B_ = batch.batch, S_ = batch.seq_len, P_ = batch.max_pred;
  const int64_t B = B_, S = S_, P = P_, BS = B * S;
  mask_in_ = ids_input(ctx, input_mask_, batch.input_mask, {B, S});
  if (sequence_) sequence_->stage(ctx, B, S);
  if (range_.first) {
    positions_.resize(size_t(BS));
    for (int64_t i = 0; i < BS; ++i) positions_[i] = int32_t(i % S);
    ids_in_ = ids_input(ctx, input_ids_, batch.input_ids, {BS});
    positions_in_ = ids_input(ctx, position_ids_, positions_, {BS});
    segments_in_ = ids_input(ctx, segment_ids_, batch.segment_ids, {BS});
  }
  if (!range_.last) return;
  if (config_.binary_head) {
    first_rows_.resize(size_t(B));
    for (int64_t b = 0; b < B; ++b) first_rows_[b] = int32_t(b * S);
    first_rows_in_ = ids_input(ctx, first_rows_buf_, first_rows_, {B});
    nsp_loss_.stage(ctx, batch.nsp_labels.data(), B);
  }
  gather_rows_.resize(size_t(B * P));
  for (int64_t i = 0; i < B * P; ++i) gather_rows_[i] = int32_t((i / P) * S + batch.masked_positions[i]);
  gather_rows_in_ = ids_input(ctx, gather_rows_buf_, gather_rows_, {B * P});
  if (tp_.split()) vocab_mlm_loss_.stage(ctx, batch.masked_ids.data(), batch.masked_weights.data(), B * P);
  else mlm_loss_.stage(ctx, batch.masked_ids.data(), batch.masked_weights.data(), B * P);
}

Tensor BertStage::embed(const Step& step) {
  Context& ctx = *step.ctx;
  Tensor x = embeddings_.get(*step.ctx, {B_ * S_, config_.hidden}, step.compute_dtype);  // (B*S, H)
  ops::add(ctx, word_->forward(step, ids_in_), position_->forward(step, positions_in_), x);
  ops::add(ctx, x, token_type_->forward(step, segments_in_), x);
  if (embedding_norm_) x = embedding_norm_->forward(step, x);
  return embedding_dropout_.forward(step, x, B_);
}

Tensor BertStage::forward(const Step& step, const data::BertBatch& batch, const Tensor& input, BertOutputs* out) {
  KILN_CHECK(out || !range_.last, "BERT stage: the last stage's forward needs somewhere to put the losses");
  stage(step, batch);
  Tensor y = forward_staged(step, input);
  if (range_.last) *out = read_losses();
  return y;
}

Tensor BertStage::forward_staged(const Step& step, const Tensor& input) {
  KILN_CHECK(B_ > 0, "BERT stage: forward before a batch was staged");
  Tensor x = range_.first ? embed(step) : input;
  if (range_.first && sequence_) x = sequence_->take(*step.ctx, x, embedding_rows_);
  KILN_CHECK(x.shape == Shape({boundary_rows(B_, S_), config_.hidden}), "BERT stage: input {} is not ({}, {})",
             shape_str(x.shape), boundary_rows(B_, S_), config_.hidden);
  x = layers_forward(step, x, mask_in_);
  if (!range_.last) return x;
  if (sequence_) x = sequence_->gather(*step.ctx, x, whole_output_);
  if (final_norm_) x = final_norm_->forward(step, x);
  heads(step, x);  // x: the sequence output (B*S, H)
  return {};
}

// The pooler, NSP head, MLM transform and decoder over the sequence output x (B*S, H); the
// losses stay on the device.
void BertStage::heads(const Step& step, const Tensor& x) {
  Context& ctx = *step.ctx;
  const int64_t B = B_, P = P_, H = config_.hidden, V = vocab_rows_;
  const DType dt = step.compute_dtype;
  if (config_.binary_head) {
    Tensor first = first_tokens_.get(*step.ctx, {B, H}, dt);  // (B, H) token 0 of each row
    ops::gather_rows(ctx, x, first_rows_in_, first);
    Tensor pooled = pooler_act_.forward(step, pooler_->forward(step, first));
    nsp_logits_ = as_f32(ctx, seq_relationship_->forward(step, pooled), nsp_f32_);  // (B, 2)
    nsp_loss_.forward(nsp_logits_);
  }
  Tensor gathered = gathered_.get(*step.ctx, {B * P, H}, dt);
  ops::gather_rows(ctx, x, gather_rows_in_, gathered);
  Tensor t = transform_act_.forward(step, transform_->forward(step, gathered));
  transformed_ = transform_norm_->forward(step, t);  // (B*P, H)
  // logits (f32) = t Wword^T + bias, whatever the operands' dtype.
  mlm_logits_ = logits_.get(*step.ctx, {B * P, V});
  const Tensor bias = decoder_bias_.value();
  ops::MatmulOpts o;
  o.bias = &bias;
  ops::matmul(ctx, ops::mat(transformed_), ops::mat(decoder_weight_.compute(), true), ops::mat(mlm_logits_), o);
  if (tp_.split()) vocab_mlm_loss_.forward(mlm_logits_, vocab_start_);
  else mlm_loss_.forward(mlm_logits_);
}

BertOutputs BertStage::outputs(const nn::LossResult& mlm, const nn::LossResult& nsp) const {
  BertOutputs out;
  out.nsp_loss = nsp.loss;
  out.nsp_correct = nsp.correct;
  out.nsp_count = int64_t(nsp.count);
  out.mlm_loss = mlm.loss;
  out.mlm_correct = mlm.correct;
  out.mlm_weight_sum = mlm.count;
  out.loss = out.mlm_loss + out.nsp_loss;
  return out;
}

BertOutputs BertStage::read_losses() const {
  KILN_CHECK(range_.last, "BERT stage: only the last stage has losses");
  return outputs(tp_.split() ? vocab_mlm_loss_.read() : mlm_loss_.read(),
                 config_.binary_head ? nsp_loss_.read() : nn::LossResult{});
}

void BertStage::keep_losses(Tensor& slot) const {
  KILN_CHECK(range_.last && ctx_ && slot.numel() == kLossTotals && slot.dtype == DType::i64,
             "BERT stage: keep_losses needs the last stage after a forward and ({}) i64, got {} {}", kLossTotals,
             dtype_name(slot.dtype), shape_str(slot.shape));
  Tensor mlm = slot.slice_rows(0, 3), nsp = slot.slice_rows(3, 6);
  ops::copy(*ctx_, tp_.split() ? vocab_mlm_loss_.totals() : mlm_loss_.totals(), mlm);
  if (config_.binary_head) ops::copy(*ctx_, nsp_loss_.totals(), nsp);
}

BertOutputs BertStage::read_losses(const Tensor& slot) const {
  double totals[kLossTotals];
  Tensor host = Tensor::view(totals, {kLossTotals}, DType::i64);
  ops::copy(*ctx_, slot, host);
  return outputs(nn::xent_result(totals, nn::MlmLoss::kNorm),
                 config_.binary_head ? nn::xent_result(totals + 3, nn::NspLoss::kNorm) : nn::LossResult{});
}

// -> the gradient of the sequence output (B*S, H).
Tensor BertStage::heads_backward(const Step& step, float loss_scale) {
  Context& ctx = *step.ctx;
  const int64_t H = config_.hidden, N = B_ * P_, BS = B_ * S_;
  const DType dt = transformed_.dtype;
  // MLM decoder: logits = t W^T + bias. The loss writes dlogits (N, V) in the operands' dtype
  // (computed in f32); the weight gradient's product also sums it for the bias gradient.
  const Tensor dlogits = tp_.split() ? vocab_mlm_loss_.backward(loss_scale, dt) : mlm_loss_.backward(loss_scale, dt);
  Tensor db = decoder_bias_.grad();
  const Param::GradTarget dw = decoder_weight_.grad_for_write();  // the word embedding or its copy
  ops::MatmulOpts dw_opts;
  dw_opts.beta = dw.accumulate ? 1.0f : 0.0f;
  dw_opts.bias_grad = &db;
  ops::matmul(ctx, ops::mat(dlogits, true), ops::mat(transformed_), ops::mat(dw.grad), dw_opts);
  Tensor dt_ = dtransformed_.get(*step.ctx, {N, H}, dt);
  ops::matmul(ctx, ops::mat(dlogits), ops::mat(decoder_weight_.compute()), ops::mat(dt_));
  tp_.all_reduce(dt_);  // each vocab shard's part of d(transformed)
  Tensor d = transform_norm_->backward(step, dt_);
  d = transform_->backward(step, transform_act_.backward(step, d));  // (N, H)
  Tensor dx = dsequence_.get(*step.ctx, {BS, H}, dt);
  ops::fill(ctx, dx, 0.0f);
  ops::scatter_add_rows(ctx, d, gather_rows_in_, dx);
  if (config_.binary_head) {
    const Tensor dnsp = nsp_loss_.backward(loss_scale, dt);  // (B, 2)
    Tensor dp = seq_relationship_->backward(step, dnsp);
    dp = pooler_->backward(step, pooler_act_.backward(step, dp));  // (B, H)
    ops::scatter_add_rows(ctx, dp, first_rows_in_, dx);
  }
  return final_norm_ ? final_norm_->backward(step, dx) : dx;
}

// The layers need nothing from the host between their first op and their last: one graph per
// direction (nn/graphed_region.h), keyed by the addresses and sizes the host passes in.
Tensor BertStage::layers_forward(const Step& step, const Tensor& x, const Tensor& mask) {
  if (loan_ && step.training) loan_->check_unwritten();
  const nn::GraphedRegion::Key key = {int64_t(x.data), int64_t(mask.data), B_, S_, int64_t(x.dtype), step.training};
  return layers_forward_.run(step, key, nullptr, [&] {
    Tensor y = x;
    for (size_t n = 0; n < layers_.size(); ++n) {
      nn::LoanScope lend(loan_ ? &*loan_ : nullptr, int64_t(n));
      if (step.training && recompute_.copies_input[n]) {
        Tensor kept = input_copies_[n].get(*step.ctx, y.shape, y.dtype);
        ops::copy(*step.ctx, y, kept);
        y = kept;
      }
      layer_input_[n] = y;
      y = layers_[n]->forward(step, y, mask);
    }
    return y;
  });
}

void BertStage::lend_gradients() {
  KILN_CHECK(range_.first && range_.last && store_.allocated(),
             "BERT stage: only the whole model, allocated, lends its gradients to activations");
  std::vector<int64_t> layer_begins;  // a layer's first parameter is its query weight
  for (const auto& layer : layers_) layer_begins.push_back(layer->attention.query.weight.spec().offset);
  loan_.emplace(store_, std::move(layer_begins));
}

Tensor BertStage::layers_backward(const Step& step, const Tensor& dy) {
  const auto body = [&] {
    Tensor dx = dy;
    size_t group = recompute_.groups.size();
    for (size_t n = layers_.size(); n-- > 0;) {
      if (group > 0 && recompute_.groups[group - 1].end == int64_t(n) + 1) recompute_group(step, --group);
      dx = layers_[n]->backward(step, dx);
      step.grads_final_from(layers_[n]->attention.query.weight.spec().offset);
    }
    return dx;
  };
  if (step.grad_watch) return body();  // gradient buckets start their reductions in between
  const nn::GraphedRegion::Key key = {int64_t(dy.data), B_, S_, int64_t(dy.dtype)};
  return layers_backward_.run(step, key, &store_, body);
}

void BertStage::recompute_group(const Step& step, size_t group) {
  const RecomputeGroup& g = recompute_.groups[group];
  Tensor y = layer_input_[size_t(g.first)];
  for (int64_t n = g.first; n < g.end; ++n) y = layers_[size_t(n)]->forward(step, y, mask_in_);
}

void BertStage::embed_backward(const Step& step, Tensor dx) {
  dx = embedding_dropout_.backward(step, dx);
  if (embedding_norm_) dx = embedding_norm_->backward(step, dx);
  word_->backward(step, dx);
  position_->backward(step, dx);
  token_type_->backward(step, dx);
}

Tensor BertStage::backward(const Step& step, const Tensor& dy, float loss_scale) {
  KILN_CHECK(B_ > 0, "BertStage::backward called before forward");
  Tensor dx = dy;
  if (range_.last) {
    dx = heads_backward(step, loss_scale);
    if (sequence_) dx = sequence_->take(*step.ctx, dx, output_grad_rows_);  // the same on every rank
    // Every head parameter is final; the decoder weight is too unless it is the word embedding.
    const Param& first_head = final_norm_ ? final_norm_->weight : pooler_ ? pooler_->weight : transform_->weight;
    step.grads_final_from(first_head.spec().offset);
  }
  dx = layers_backward(step, dx);
  if (!range_.first) return dx;
  if (sequence_) dx = sequence_->gather(*step.ctx, dx, whole_input_grad_);
  embed_backward(step, dx);
  return {};
}

void BertStage::forward_backward(const Step& step, const data::BertBatch& batch, float loss_scale) {
  KILN_CHECK(range_.first && range_.last, "BERT stage: forward_backward needs the whole model");
  stage(step, batch);
  const auto body = [&](const Step& s) {
    forward_staged(s, Tensor{});
    backward(s, Tensor{}, loss_scale);
    return Tensor{};
  };
  if (!step.capture_regions || step.grad_watch) {
    body(step);
  } else {
    Step inner = step;
    inner.capture_regions = false;  // no graphs inside this one
    const nn::GraphedRegion::Key key = {B_, S_, P_, int64_t(step.compute_dtype), int64_t(f32_bits(loss_scale)),
                                        step.training};
    micro_batch_.run(step, key, &store_, [&] { return body(inner); });
  }
}

}  // namespace kiln::models
