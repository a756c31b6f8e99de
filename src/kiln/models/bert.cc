#include "kiln/models/bert.h"

#include <cmath>
#include <cstring>
#include <string>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/core/init.h"
#include "kiln/core/philox.h"

namespace kiln::models {
namespace {

void check_batch(const data::BertBatch& b, const BertConfig& c) {
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
}

}  // namespace

BertForPretraining::BertForPretraining(const BertConfig& config, ParamStore& store)
    : config_(config),
      store_(store),
      word_(store, "bert.embeddings.word_embeddings.weight", config.vocab_size, config.hidden),
      position_(store, "bert.embeddings.position_embeddings.weight", config.max_position,
                config.hidden),
      token_type_(store, "bert.embeddings.token_type_embeddings.weight", config.type_vocab,
                  config.hidden),
      embedding_dropout_(config.hidden_dropout, 0) {
  const BertConfig& c = config;
  KILN_CHECK(c.hidden > 0 && c.heads > 0 && c.hidden % c.heads == 0,
             "BERT config: hidden {} must be a positive multiple of heads {}", c.hidden, c.heads);
  KILN_CHECK(c.layers > 0 && c.layers < 16000, "BERT config: layers {} out of range", c.layers);
  if (!c.pre_ln)
    embedding_norm_.emplace(store, "bert.embeddings.LayerNorm", c.hidden, c.layer_norm_eps);
  // Layer n uses dropout streams 4n+1..4n+3; stream 0 is the embedding dropout.
  for (int64_t n = 0; n < c.layers; ++n)
    layers_.push_back(std::make_unique<nn::TransformerLayer>(
        store, "bert.encoder.layer." + std::to_string(n), c.hidden, c.heads, c.intermediate,
        c.hidden_dropout, c.attention_dropout, c.pre_ln,
        c.pre_ln ? nn::GeluKind::tanh : nn::GeluKind::erf, uint32_t(n)));
  if (c.pre_ln) final_norm_.emplace(store, "bert.encoder.LayerNorm", c.hidden, c.layer_norm_eps);
  if (c.binary_head) pooler_.emplace(store, "bert.pooler.dense", c.hidden, c.hidden);
  transform_.emplace(store, "cls.predictions.transform.dense", c.hidden, c.hidden);
  transform_norm_.emplace(store, "cls.predictions.transform.LayerNorm", c.hidden,
                          c.layer_norm_eps);
  decoder_bias_ = store.add("cls.predictions.bias", {c.vocab_size}, false);
  if (c.binary_head) seq_relationship_.emplace(store, "cls.seq_relationship", c.hidden, 2);
  // The layers take eps from their own defaults; BERT's is 1e-12, the config may differ.
  for (auto& layer : layers_) {
    layer->attention_norm.eps = c.layer_norm_eps;
    layer->output_norm.eps = c.layer_norm_eps;
  }
  store.allocate();
}

void BertForPretraining::init_mlperf(uint64_t seed) {
  const auto& specs = store_.specs();
  for (const ParamSpec& s : specs) {
    float* w = store_.values.ptr<float>() + s.offset;
    const bool is_norm_weight = s.name.find("LayerNorm.weight") != std::string::npos;
    if (!s.decay) {
      std::fill(w, w + s.numel, is_norm_weight ? 1.0f : 0.0f);
      continue;
    }
    const float scale = config_.init_std;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < s.numel; ++e) w[e] = scale * truncated_normal(seed, s.name, uint64_t(e));
  }
}

BertOutputs BertForPretraining::forward(const Step& step, const data::BertBatch& batch) {
  check_batch(batch, config_);
  const int64_t B = batch.batch, S = batch.seq_len, P = batch.max_pred;
  const int64_t H = config_.hidden, V = config_.vocab_size, BS = B * S;
  B_ = B, S_ = S, P_ = P;

  positions_.resize(size_t(BS));
  for (int64_t i = 0; i < BS; ++i) positions_[i] = int32_t(i % S);
  Tensor x = embeddings_.get({BS, H});  // (B*S, H)
  ops::add(word_.forward(batch.input_ids.data(), BS).ptr<float>(),
           position_.forward(positions_.data(), BS).ptr<float>(), BS * H, x.ptr<float>());
  ops::add_inplace(x.ptr<float>(), token_type_.forward(batch.segment_ids.data(), BS).ptr<float>(),
                   BS * H);
  if (embedding_norm_) x = embedding_norm_->forward(step, x);
  x = embedding_dropout_.forward(step, x);
  for (auto& layer : layers_) x = layer->forward(step, x, batch.input_mask.data(), B, S);
  if (final_norm_) x = final_norm_->forward(step, x);
  // x: the sequence output (B*S, H)

  BertOutputs out;
  if (config_.binary_head) {
    Tensor first = first_tokens_.get({B, H});  // (B, H) token 0 of each row
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(first.ptr<float>() + b * H, x.ptr<float>() + b * S * H, sizeof(float) * H);
    Tensor pooled = pooler_act_.forward(step, pooler_->forward(step, first));
    nsp_logits_ = seq_relationship_->forward(step, pooled);  // (B, 2)
    const nn::LossResult r = nsp_loss_.forward(nsp_logits_, batch.nsp_labels.data());
    out.nsp_loss = r.loss;
    out.nsp_correct = r.correct;
    out.nsp_count = int64_t(r.count);
  }

  gather_rows_.resize(size_t(B * P));
  for (int64_t i = 0; i < B * P; ++i)
    gather_rows_[i] = int32_t((i / P) * S + batch.masked_positions[i]);
  Tensor gathered = gathered_.get({B * P, H});
  ops::gather_rows(x.ptr<float>(), BS, H, gather_rows_.data(), B * P, gathered.ptr<float>());
  Tensor t = transform_act_.forward(step, transform_->forward(step, gathered));
  transformed_ = transform_norm_->forward(step, t);  // (B*P, H)
  mlm_logits_ = logits_.get({B * P, V});
  ops::gemm(false, true, B * P, V, H, 1.0f, transformed_.ptr<float>(), H, word_.weight.w(), H,
            0.0f, mlm_logits_.ptr<float>(), V);
  ops::bias_add(mlm_logits_.ptr<float>(), decoder_bias_.w(), B * P, V);
  const nn::LossResult m =
      mlm_loss_.forward(mlm_logits_, batch.masked_ids.data(), batch.masked_weights.data());
  out.mlm_loss = m.loss;
  out.mlm_correct = m.correct;
  out.mlm_weight_sum = m.count;
  out.loss = out.mlm_loss + out.nsp_loss;
  return out;
}

void BertForPretraining::backward(const Step& step, float loss_scale) {
  KILN_CHECK(B_ > 0, "BertForPretraining::backward called before forward");
  const int64_t H = config_.hidden, V = config_.vocab_size, N = B_ * P_, BS = B_ * S_;

  // MLM decoder: logits = t W^T + bias, with W the word embedding table.
  Tensor dlogits = mlm_loss_.backward(loss_scale);  // (N, V)
  ops::gemm(true, false, V, H, N, 1.0f, dlogits.ptr<float>(), V, transformed_.ptr<float>(), H,
            1.0f, word_.weight.g(), H);
  ops::bias_grad(dlogits.ptr<float>(), N, V, decoder_bias_.g());
  Tensor dt = dtransformed_.get({N, H});
  ops::gemm(false, false, N, H, V, 1.0f, dlogits.ptr<float>(), V, word_.weight.w(), H, 0.0f,
            dt.ptr<float>(), H);
  dt = transform_norm_->backward(step, dt);
  dt = transform_->backward(step, transform_act_.backward(step, dt));  // (N, H)

  Tensor dx = dsequence_.get({BS, H});  // (B*S, H)
  std::memset(dx.data, 0, dx.nbytes());
  ops::scatter_add_rows(dt.ptr<float>(), gather_rows_.data(), N, H, dx.ptr<float>());
  if (config_.binary_head) {
    Tensor d = seq_relationship_->backward(step, nsp_loss_.backward(loss_scale));
    d = pooler_->backward(step, pooler_act_.backward(step, d));  // (B, H)
    for (int64_t b = 0; b < B_; ++b)
      ops::add_inplace(dx.ptr<float>() + b * S_ * H, d.ptr<float>() + b * H, H);
  }

  if (final_norm_) dx = final_norm_->backward(step, dx);
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) dx = (*it)->backward(step, dx);
  dx = embedding_dropout_.backward(step, dx);
  if (embedding_norm_) dx = embedding_norm_->backward(step, dx);
  word_.backward(dx);
  position_.backward(dx);
  token_type_.backward(dx);
}

int64_t BertForPretraining::flops_per_sample(int seq_len, int max_pred) const {
  const int64_t H = config_.hidden, I = config_.intermediate, V = config_.vocab_size,
                L = config_.layers, S = seq_len, P = max_pred;
  const int64_t head = config_.binary_head ? H * H + 2 * H : 0;
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
