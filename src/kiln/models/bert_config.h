// models/bert_config.h — what every piece of the BERT model shares: its sizes (BertConfig), the
// outputs of the heads (BertOutputs), the batch check, the MLPerf initialisation by name and
// element, and the FLOP count. The model itself: models/bert_stage.h (any contiguous part of it,
// with or without tensor parallelism) and models/bert.h (the whole model).
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/data/bert/bert_batch.h"
#include "kiln/nn/attention_core.h"
#include "kiln/nn/params.h"

namespace kiln::models {

struct BertConfig {
  int64_t vocab_size = 30522, hidden = 1024, layers = 24, heads = 16, intermediate = 4096,
          max_position = 512, type_vocab = 2;
  float hidden_dropout = 0.1f, attention_dropout = 0.1f, layer_norm_eps = 1e-12f,
        init_std = 0.02f;
  bool pre_ln = false;
  bool binary_head = true;  // pooler + next-sentence head; without it nsp_loss is 0
  // Megatron's selective recomputation: one set of attention-core buffers (B, heads, S, S)
  // for all layers instead of one per layer; backward recomputes the core.
  bool recompute_attention = false;
  // Megatron's full recomputation (--recompute-granularity full): backward recomputes whole
  // encoder layers from the saved input of their group, so the recomputed layers of a stage keep
  // one group's activations between them. uniform: every run of recompute_layers layers of a
  // stage is a group; block: each of a stage's first recompute_layers layers is one.
  enum class Recompute { none, uniform, block };
  Recompute recompute = Recompute::none;
  int64_t recompute_layers = 1;
  // Megatron's sequence parallelism with tensor parallelism (models/bert_stage.h).
  bool sequence_parallel = false;
  // --attention-backend: the unfused core, fused attention, or automatic (nn/attention_core.h).
  nn::AttentionCore attention_core = nn::AttentionCore::automatic;
};

// Full recomputation over a stage's `layers` layers (stage-local indices): the groups [first, end)
// recomputed together (none without it); the layer whose buffers each layer uses, itself where it
// keeps its own (uniform: a group's n-th layer uses the first group's n-th; block: the recomputed
// layers use those of the first layer that is not, whose activations are not yet alive when they
// run and dead again when they are recomputed, or the first layer's when every layer is
// recomputed); and the layers whose input forward copies, because it lives in buffers that
// another layer overwrites before backward.
struct RecomputeGroup {
  int64_t first = 0, end = 0;
};
struct RecomputeLayout {
  std::vector<RecomputeGroup> groups;
  std::vector<int64_t> storage_of;
  std::vector<bool> copies_input;
  // The layers that backward recomputes (the groups are consecutive from the stage's first).
  int64_t recomputed() const { return groups.empty() ? 0 : groups.back().end - groups.front().first; }
};
RecomputeLayout recompute_layout(const BertConfig& config, int64_t layers);

struct BertOutputs {
  double loss = 0, mlm_loss = 0, nsp_loss = 0;
  int64_t mlm_correct = 0;     // masked slots with weight > 0 predicted right
  double mlm_weight_sum = 0;   // sum of masked_weights
  int64_t nsp_correct = 0, nsp_count = 0;  // over rows with nsp label != -1
};

// MLPerf initialisation of every parameter in `store`: every Linear / Embedding weight (the
// parameters with decay) = init_std x truncated_normal(seed, parameter name, element of the
// whole parameter) (core/init.h); biases 0; LayerNorm weight 1, bias 0. By name and element,
// so a pipeline stage's or a tensor-parallel rank's parameters get the values of the whole
// model's, independent of thread count and parameter order.
void init_bert_weights(ParamStore& store, uint64_t seed, float init_std);
// Training FLOPs of one sample (forward + backward = 3 x forward; a matmul with k weights
// costs 2k per row forward):
//   6 x [ S x layers x (4 H^2 + 2 H I)      encoder projections and MLP, every token
//        + max_pred x (H^2 + H V)            MLM transform and decoder, masked slots only
//        + (H^2 + 2 H) if binary_head ]      pooler and NSP, one row
//   + 12 x layers x S^2 x H                  attention scores Q K^T and probs V
// Biases, LayerNorm, softmax and embeddings are not counted.
int64_t bert_flops_per_sample(const BertConfig& config, int seq_len, int max_pred);
// Throws kiln::Error for a batch whose sizes disagree or whose ids are outside the model's ranges.
void check_bert_batch(const data::BertBatch& batch, const BertConfig& config);

}  // namespace kiln::models
