#include "kiln/models/bert.h"

#include <cmath>
#include <string>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/core/init.h"
#include "kiln/core/philox.h"

namespace kiln::models {
namespace {

// A host i32 tensor over a batch vector (read by the ops during the step).
Tensor ids_view(const std::vector<int32_t>& v, Shape shape) {
  return Tensor::view(const_cast<int32_t*>(v.data()), std::move(shape), DType::i32);
}

}  // namespace

void check_bert_batch(const data::BertBatch& b, const BertConfig& c) {
  KILN_CHECK(b.batch > 0 && b.seq_len > 0 && b.max_pred > 0,
             "BERT batch: batch {}, seq_len {}, max_pred {} must all be positive", b.batch,
             b.seq_len, b.max_pred);
  KILN_CHECK(b.seq_len <= c.max_position,
             "BERT batch: seq_len {} exceeds the model's max_position {}", b.seq_len,
             c.max_position);
  const size_t BS = size_t(b.batch) * b.seq_len, BP = size_t(b.batch) * b.max_pred;
  KILN_CHECK(b.input_ids.size() == BS && b.segment_ids.size() == BS && b.input_mask.size() == BS,
             "BERT batch: input_ids/segment_ids/input_mask have {}/{}/{} entries, expected {}",
             b.input_ids.size(), b.segment_ids.size(), b.input_mask.size(), BS);
  KILN_CHECK(b.masked_positions.size() == BP && b.masked_ids.size() == BP &&
                 b.masked_weights.size() == BP,
             "BERT batch: masked_positions/ids/weights have {}/{}/{} entries, expected {}",
             b.masked_positions.size(), b.masked_ids.size(), b.masked_weights.size(), BP);
  KILN_CHECK(b.nsp_labels.size() == size_t(b.batch),
             "BERT batch: nsp_labels has {} entries, expected {}", b.nsp_labels.size(), b.batch);
  for (size_t i = 0; i < BP; ++i)
    KILN_CHECK(b.masked_positions[i] >= 0 && b.masked_positions[i] < b.seq_len,
               "BERT batch: masked position {} (row {}) outside [0, {})", b.masked_positions[i],
               i / b.max_pred, b.seq_len);
  // The embedding gathers do not check ids: this is where they are validated.
  for (size_t i = 0; i < BS; ++i) {
    KILN_CHECK(b.input_ids[i] >= 0 && b.input_ids[i] < c.vocab_size,
               "BERT batch: input id {} at position {} is outside the vocabulary [0, {})",
               b.input_ids[i], i, c.vocab_size);
    KILN_CHECK(b.segment_ids[i] >= 0 && b.segment_ids[i] < c.type_vocab,
               "BERT batch: segment id {} at position {} is outside [0, {})", b.segment_ids[i],
               i, c.type_vocab);
  }
}

namespace {

// The word embedding: vocab-parallel when split.
nn::Embedding word_embedding(ParamStore& store, const BertConfig& c, const nn::TensorParallel& tp) {
  const std::string name = "bert.embeddings.word_embeddings.weight";
  if (tp.split()) return nn::Embedding(store, name, c.vocab_size, c.hidden, tp);
  return nn::Embedding(store, name, c.vocab_size, c.hidden);
}

// Element e of a parameter part: its index in the whole parameter (row-major).
uint64_t whole_index(const ParamSpec& s, int64_t e) {
  if (s.part_dim < 0) return uint64_t(e);
  int64_t inner = 1;  // elements per entry of part_dim
  for (size_t d = size_t(s.part_dim) + 1; d < s.shape.size(); ++d) inner *= s.shape[d];
  const int64_t outer = e / (s.shape[size_t(s.part_dim)] * inner), rest = e % (s.shape[size_t(s.part_dim)] * inner);
  return uint64_t((outer * s.full_shape[size_t(s.part_dim)] + s.part_start) * inner + rest);
}

}  // namespace

BertForPretraining::BertForPretraining(const BertConfig& config, ParamStore& store, Context& ctx,
                                       const nn::TensorParallel& tp)
    : config_(config),
      store_(store),
      tp_(tp),
      word_(word_embedding(store, config, tp)),
      position_(store, "bert.embeddings.position_embeddings.weight", config.max_position,
                config.hidden),
      token_type_(store, "bert.embeddings.token_type_embeddings.weight", config.type_vocab,
                  config.hidden),
      embedding_dropout_(config.hidden_dropout, 0),
      vocab_mlm_loss_(tp) {
  const BertConfig& c = config;
  KILN_CHECK(c.hidden > 0 && c.heads > 0 && c.hidden % c.heads == 0,
             "BERT config: hidden {} must be a positive multiple of heads {}", c.hidden, c.heads);
  KILN_CHECK(c.layers > 0 && c.layers < 16000, "BERT config: layers {} out of range", c.layers);
  if (!c.pre_ln)
    embedding_norm_.emplace(store, "bert.embeddings.LayerNorm", c.hidden, c.layer_norm_eps);
  // Layer n uses dropout streams 4n+1..4n+3; stream 0 is the embedding dropout.
  for (int64_t n = 0; n < c.layers; ++n) {
    layer_offsets_.push_back(store.size());
    layers_.push_back(std::make_unique<nn::TransformerLayer>(
        store, "bert.encoder.layer." + std::to_string(n), c.hidden, c.heads, c.intermediate,
        c.hidden_dropout, c.attention_dropout, c.pre_ln,
        c.pre_ln ? nn::GeluKind::tanh : nn::GeluKind::erf, uint32_t(n),
        c.recompute_attention ? &shared_attention_ : nullptr, tp));
  }
  heads_offset_ = store.size();
  if (c.pre_ln) final_norm_.emplace(store, "bert.encoder.LayerNorm", c.hidden, c.layer_norm_eps);
  if (c.binary_head) pooler_.emplace(store, "bert.pooler.dense", c.hidden, c.hidden);
  transform_.emplace(store, "cls.predictions.transform.dense", c.hidden, c.hidden);
  transform_norm_.emplace(store, "cls.predictions.transform.LayerNorm", c.hidden,
                          c.layer_norm_eps);
  decoder_bias_ = tp.split() ? store.add_part("cls.predictions.bias", {c.vocab_size}, false, 0,
                                              word_.start, word_.num)
                             : store.add("cls.predictions.bias", {c.vocab_size}, false);
  if (c.binary_head) seq_relationship_.emplace(store, "cls.seq_relationship", c.hidden, 2);
  // The layers take eps from their own defaults; BERT's is 1e-12, the config may differ.
  for (auto& layer : layers_) {
    layer->attention_norm.eps = c.layer_norm_eps;
    layer->output_norm.eps = c.layer_norm_eps;
  }
  if (tp.rank > 0)  // replicated parameters count on tp rank 0
    for (size_t id = 0; id < store.specs().size(); ++id)
      if (store.specs()[id].part_dim < 0) store.set_norm_owner(int(id), false);
  store.allocate(ctx);
}

void init_bert_weights(ParamStore& store, uint64_t seed, float init_std) {
  for (const ParamSpec& s : store.specs()) {
    float* w = store.values.ptr<float>() + s.offset;
    const bool is_norm_weight = s.name.find("LayerNorm.weight") != std::string::npos;
    if (!s.decay) {
      std::fill(w, w + s.numel, is_norm_weight ? 1.0f : 0.0f);
      continue;
    }
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < s.numel; ++e) w[e] = init_std * truncated_normal(seed, s.name, whole_index(s, e));
  }
}

void BertForPretraining::init_mlperf(uint64_t seed) { init_bert_weights(store_, seed, config_.init_std); }

BertOutputs BertForPretraining::forward(const Step& step, const data::BertBatch& batch) {
  check_bert_batch(batch, config_);
  KILN_CHECK(step.compute_dtype == store_.compute_dtype(),
             "BERT: the step computes in {} but the weights' compute copy is {}",
             dtype_name(step.compute_dtype), dtype_name(store_.compute_dtype()));
  Context& ctx = *step.ctx;
  const int64_t B = batch.batch, S = batch.seq_len, P = batch.max_pred;
  const int64_t H = config_.hidden, V = word_.num, BS = B * S;  // V: this rank's vocab rows
  const DType dt = step.compute_dtype;
  B_ = B, S_ = S, P_ = P;

  positions_.resize(size_t(BS));
  for (int64_t i = 0; i < BS; ++i) positions_[i] = int32_t(i % S);
  Tensor x = embeddings_.get({BS, H}, dt);  // (B*S, H)
  ops::add(ctx, word_.forward(step, ids_view(batch.input_ids, {BS})),
           position_.forward(step, ids_view(positions_, {BS})), x);
  ops::add(ctx, x, token_type_.forward(step, ids_view(batch.segment_ids, {BS})), x);
  if (embedding_norm_) x = embedding_norm_->forward(step, x);
  x = embedding_dropout_.forward(step, x, B);
  const Tensor mask = ids_view(batch.input_mask, {B, S});
  for (auto& layer : layers_) x = layer->forward(step, x, mask);
  if (final_norm_) x = final_norm_->forward(step, x);
  // x: the sequence output (B*S, H)

  BertOutputs out;
  if (config_.binary_head) {
    first_rows_.resize(size_t(B));
    for (int64_t b = 0; b < B; ++b) first_rows_[b] = int32_t(b * S);
    Tensor first = first_tokens_.get({B, H}, dt);  // (B, H) token 0 of each row
    ops::gather_rows(ctx, x, ids_view(first_rows_, {B}), first);
    Tensor pooled = pooler_act_.forward(step, pooler_->forward(step, first));
    nsp_logits_ = seq_relationship_->forward(step, pooled);  // (B, 2)
    if (dt != DType::f32) {
      Tensor f = nsp_f32_.get({B, 2});
      ops::cast(ctx, nsp_logits_, f);
      nsp_logits_ = f;
    }
    const nn::LossResult r = nsp_loss_.forward(nsp_logits_, batch.nsp_labels.data(), ctx);
    out.nsp_loss = r.loss;
    out.nsp_correct = r.correct;
    out.nsp_count = int64_t(r.count);
  }

  gather_rows_.resize(size_t(B * P));
  for (int64_t i = 0; i < B * P; ++i)
    gather_rows_[i] = int32_t((i / P) * S + batch.masked_positions[i]);
  Tensor gathered = gathered_.get({B * P, H}, dt);
  ops::gather_rows(ctx, x, ids_view(gather_rows_, {B * P}), gathered);
  Tensor t = transform_act_.forward(step, transform_->forward(step, gathered));
  transformed_ = transform_norm_->forward(step, t);  // (B*P, H)
  // logits (f32) = t Wword^T + bias, whatever the operands' dtype.
  mlm_logits_ = logits_.get({B * P, V});
  const Tensor decoder_bias = decoder_bias_.value();
  ops::MatmulOpts o;
  o.bias = &decoder_bias;
  ops::matmul(ctx, ops::mat(transformed_), ops::mat(word_.weight.compute(), true),
              ops::mat(mlm_logits_), o);
  const nn::LossResult m =
      tp_.split() ? vocab_mlm_loss_.forward(ctx, mlm_logits_, word_.start, batch.masked_ids.data(),
                                            batch.masked_weights.data())
                  : mlm_loss_.forward(mlm_logits_, batch.masked_ids.data(), batch.masked_weights.data(), ctx);
  out.mlm_loss = m.loss;
  out.mlm_correct = m.correct;
  out.mlm_weight_sum = m.count;
  out.loss = out.mlm_loss + out.nsp_loss;
  return out;
}

void BertForPretraining::backward(const Step& step, float loss_scale) {
  KILN_CHECK(B_ > 0, "BertForPretraining::backward called before forward");
  Context& ctx = *step.ctx;
  const int64_t H = config_.hidden, V = word_.num, N = B_ * P_, BS = B_ * S_;
  const DType dt = transformed_.dtype;

  // MLM decoder: logits = t W^T + bias, with W the word embedding table. dlogits is f32; the
  // matmuls take it in the operands' dtype.
  Tensor dlogits = tp_.split() ? vocab_mlm_loss_.backward(loss_scale)
                               : mlm_loss_.backward(loss_scale);  // (N, V) f32
  Tensor decoder_db = decoder_bias_.grad();
  ops::bias_grad(ctx, dlogits, decoder_db);
  if (dt != DType::f32) {
    Tensor d = dlogits_c_.get({N, V}, dt);
    ops::cast(ctx, dlogits, d);
    dlogits = d;
  }
  ops::MatmulOpts acc;
  acc.beta = 1.0f;
  ops::matmul(ctx, ops::mat(dlogits, true), ops::mat(transformed_), ops::mat(word_.weight.grad()),
              acc);
  Tensor dt_ = dtransformed_.get({N, H}, dt);
  ops::matmul(ctx, ops::mat(dlogits), ops::mat(word_.weight.compute()), ops::mat(dt_));
  tp_.all_reduce(dt_);  // each vocab shard's part of d(transformed)
  Tensor d = transform_norm_->backward(step, dt_);
  d = transform_->backward(step, transform_act_.backward(step, d));  // (N, H)

  Tensor dx = dsequence_.get({BS, H}, dt);  // (B*S, H)
  ops::fill(ctx, dx, 0.0f);
  ops::scatter_add_rows(ctx, d, ids_view(gather_rows_, {N}), dx);
  if (config_.binary_head) {
    Tensor dnsp = nsp_loss_.backward(loss_scale);  // (B, 2) f32
    if (dt != DType::f32) {
      Tensor c = dnsp_c_.get({B_, 2}, dt);
      ops::cast(ctx, dnsp, c);
      dnsp = c;
    }
    Tensor dp = seq_relationship_->backward(step, dnsp);
    dp = pooler_->backward(step, pooler_act_.backward(step, dp));  // (B, H)
    ops::scatter_add_rows(ctx, dp, ids_view(first_rows_, {B_}), dx);
  }

  if (final_norm_) dx = final_norm_->backward(step, dx);
  step.grads_final_from(heads_offset_);  // not the decoder weight: it is the word embedding
  for (size_t n = layers_.size(); n-- > 0;) {
    dx = layers_[n]->backward(step, dx);
    step.grads_final_from(layer_offsets_[n]);
  }
  dx = embedding_dropout_.backward(step, dx);
  if (embedding_norm_) dx = embedding_norm_->backward(step, dx);
  word_.backward(step, dx);
  position_.backward(step, dx);
  token_type_.backward(step, dx);
}

int64_t BertForPretraining::flops_per_sample(int seq_len, int max_pred) const {
  return bert_flops_per_sample(config_, seq_len, max_pred);
}

int64_t bert_flops_per_sample(const BertConfig& config, int seq_len, int max_pred) {
  const int64_t H = config.hidden, I = config.intermediate, V = config.vocab_size,
                L = config.layers, S = seq_len, P = max_pred;
  const int64_t head = config.binary_head ? H * H + 2 * H : 0;
  return 6 * (S * L * (4 * H * H + 2 * H * I) + P * (H * H + H * V) + head) +
         12 * L * S * S * H;
}

int64_t BertForPretraining::param_count(const BertConfig& c) {
  const int64_t H = c.hidden, I = c.intermediate, V = c.vocab_size;
  const int64_t layer = 4 * (H * H + H) + (H * I + I) + (I * H + H) + 4 * H;
  // Embeddings, plus the embedding LayerNorm (post-LN) or the final LayerNorm (pre-LN).
  int64_t n = (V + c.max_position + c.type_vocab) * H + 2 * H;
  n += c.layers * layer;
  n += (H * H + H) + 2 * H + V;  // MLM transform, its LayerNorm, decoder bias
  if (c.binary_head) n += (H * H + H) + (2 * H + 2);
  return n;
}

}  // namespace kiln::models
