#include "kiln/models/bert.h"

namespace kiln::models {

BertForPretraining::BertForPretraining(const BertConfig& config, ParamStore& store, Context& ctx,
                                       const nn::TensorParallel& tp)
    : config_(config), store_(store), stage_(config, StageRange{0, config.layers, true, true}, store, tp) {
  store.allocate(ctx);
}

void BertForPretraining::init_mlperf(uint64_t seed) { init_bert_weights(store_, seed, config_.init_std); }

BertOutputs BertForPretraining::forward(const Step& step, const data::BertBatch& batch) {
  BertOutputs out;
  stage_.forward(step, batch, Tensor{}, &out);
  return out;
}

void BertForPretraining::backward(const Step& step, float loss_scale) {
  stage_.backward(step, Tensor{}, loss_scale);
}

int64_t BertForPretraining::flops_per_sample(int seq_len, int max_pred) const {
  return bert_flops_per_sample(config_, seq_len, max_pred);
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
