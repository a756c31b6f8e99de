#include "kiln/train/dry_run/dry_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/train/pipeline_schedule.h"

namespace kiln::train {
namespace {

// The buffers kiln's BERT holds for one micro-batch of s x b tokens and m = b x P masked positions
// (models/bert_stage.h, nn/transformer.h), bytes: what each layer keeps for backward, what the
// layers of a stage share (nn::LayerSharedBuffers), and the embeddings' and heads' buffers.
// e: the compute dtype's bytes; f32 statistics, scores, logits and their gradients.
struct KilnActivations {
  double per_layer = 0, shared = 0, embeddings = 0, heads = 0;
};

KilnActivations kiln_activations(const models::BertConfig& c, double s, double b, double m, double t, double e) {
  const double N = s * b, H = double(c.hidden), Ht = H / t, It = double(c.intermediate) / t,
               core = double(c.heads) / t * s * s * b, V = double(c.vocab_size) / t;
  // The fused core (the recipe resolves auto for the run's device) keeps the rows' lse and, with
  // attention dropout, a keep bit an element (rows of whole 32-bit words), no (B, heads, S, S).
  const bool fused = c.attention_core == nn::AttentionCore::fused;
  const double fused_saves = double(c.heads) / t * s * b * 4 +
                             (c.attention_dropout > 0 ? double(c.heads) / t * s * b * double(ops::flash_keep_words(int64_t(s))) * 4 : 0.0);
  KilnActivations k;
  // sum1, sum2, both LayerNorm outputs; q, k, v, context; FC1 and GELU outputs; LN statistics;
  // the probabilities (f32: the scores' buffer).
  // Sequence parallel: the first four and the statistics are this rank's rows (the products'
  // whole inputs are gathered again in backward).
  const double rows = c.sequence_parallel ? N / t : N;  // (B*S, H) rows a rank holds between the products
  k.per_layer = rows * H * e * 4 + N * Ht * e * 4 + N * It * e * 2 + 16 * rows +
                (fused ? fused_saves : c.recompute_attention ? 0 : core * e);
  // Forward: both projections' and dropouts' outputs; backward: the residual gradient and two
  // results, projection / dropout / FC / GELU gradients, q k v gradients. The core's two scratch
  // buffers (nn::AttentionScratch): f32 scores or their gradient, and the dropped probabilities
  // or the compute-dtype score gradient.
  // (Pre-LN: the attention's and FC1's input gradients instead of a residual gradient.) With
  // recomputation the core's probabilities are shared too.
  k.shared = N * H * e * (c.pre_ln ? 10 : 9) + N * Ht * e * 4 + N * It * e * 2 +
             (fused ? 0 : core * (4 + e) + (c.recompute_attention ? core * e : 0));
  // Tensor parallel: an input gradient before the group sums it. Sequence parallel: a product's
  // whole input, a row-parallel one's output rows and whole gradient, an input gradient's rows.
  if (t > 1) k.shared += N * H * e;
  if (c.sequence_parallel) k.shared += 2 * N * H * e + 2 * rows * H * e;
  // Word, position and type rows, their sum, LayerNorm (output, statistics, gradient), dropout
  // output and gradient.
  k.embeddings = N * H * e * 8 + 8 * N;
  // Sequence gradient; the masked rows through transform, GELU and LayerNorm and back; the f32
  // logits and their gradient in the compute dtype.
  k.heads = N * H * e + m * H * e * 8 + m * V * (4 + e);
  return k;
}

// What a stage's layers hold at the peak (backward about to start), bytes: each layer's own
// activations, or under full recomputation those of the layers whose buffers the others use and
// the copied inputs (models::recompute_layout); and what of it the gradients hold (nn/grad_loan.h:
// what layer n's forward allocates comes from the `grads_per_layer` bytes of each layer below it,
// as far as they reach).
struct LayerMemory {
  double kept = 0, lent = 0;
};

LayerMemory layer_memory(const models::BertConfig& c, int64_t layers, double per_layer, double input,
                         double grads_per_layer, bool lend) {
  const models::RecomputeLayout layout = models::recompute_layout(c, layers);
  std::vector<bool> allocated(size_t(layers), false);  // a layer's buffers, by the first forward that uses them
  LayerMemory m;
  for (size_t n = 0; n < size_t(layers); ++n) {
    const size_t storage = size_t(layout.storage_of[n]);
    const double allocates = (allocated[storage] ? 0 : per_layer) + (layout.copies_input[n] ? input : 0);
    allocated[storage] = true;
    m.kept += allocates;
    if (lend) m.lent += std::min(allocates, double(n) * grads_per_layer - m.lent);
  }
  return m;
}

std::string recompute_name(const models::BertConfig& c) {
  if (c.recompute == models::BertConfig::Recompute::uniform)
    return fmt::format("full recompute, uniform groups of {} layers", c.recompute_layers);
  if (c.recompute == models::BertConfig::Recompute::block)
    return fmt::format("full recompute of the first {} layers of a stage or chunk", c.recompute_layers);
  return c.recompute_attention ? "attention core recomputed" : "no recompute";
}

}  // namespace

std::string millions_or_billions(int64_t n) {
  return n >= 1000000000 ? fmt::format("{:.2f}B", double(n) / 1e9) : fmt::format("{:.1f}M", double(n) / 1e6);
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(int64_t(1) << 30)); }

void require_positive(int64_t v, const char* what) {
  if (v < 1) throw Error("dry run: {} must be at least 1, got {}", what, v);
}

int64_t megatron_padded_vocab(int64_t vocab, int tp, int64_t divisible_by) {
  const int64_t multiple = divisible_by * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

double megatron_bert_flops(const models::BertConfig& c, int64_t seq_length, int64_t global_batch) {
  const double B = double(global_batch), s = double(seq_length), h = double(c.hidden),
               I = double(c.intermediate), L = double(c.layers), V = double(c.vocab_size);
  return B * s * (6 * (4 * h * h) * L + 6 * (2 * h * I) * L + 6 * h * V) + 6 * B * s * s * h * L;
}

DryRunReport bert_dry_run(const models::BertConfig& config, int64_t seq_length, int64_t micro_batch,
                          int64_t global_batch, int tp, int pp, int dp, DType compute, int64_t max_predictions,
                          bool distributed_optimizer, bool split_master, int chunks) {
  const bool half = compute != DType::f32;
  require_positive(seq_length, "seq length");
  require_positive(micro_batch, "micro batch size");
  require_positive(global_batch, "global batch size");
  require_positive(tp, "tensor model parallel size");
  require_positive(pp, "pipeline model parallel size");
  require_positive(dp, "data parallel size");
  if (seq_length > config.max_position)
    throw Error("dry run: seq length {} exceeds max position embeddings {}", seq_length,
                config.max_position);
  if (config.layers % pp != 0)
    throw Error("dry run: num layers ({}) is not divisible by pipeline model parallel size ({})",
                config.layers, pp);
  require_positive(chunks, "model chunks per pipeline stage");
  if ((config.layers / pp) % chunks != 0)
    throw Error("dry run: the {} layers of a pipeline stage do not split into {} model chunks", config.layers / pp,
                chunks);
  if (config.heads % tp != 0 || config.intermediate % tp != 0)
    throw Error("dry run: attention heads ({}) and FFN size ({}) must be divisible by tensor model "
                "parallel size ({})", config.heads, config.intermediate, tp);
  if (global_batch % (micro_batch * dp) != 0)
    throw Error("dry run: global batch size ({}) is not a multiple of micro batch size x data "
                "parallel size ({} x {})", global_batch, micro_batch, dp);

  models::BertConfig c = config;
  c.vocab_size = megatron_padded_vocab(config.vocab_size, tp);
  const int64_t h = c.hidden, I = c.intermediate, V = c.vocab_size, t = tp;

  DryRunReport r;
  r.parameters = models::BertForPretraining::param_count(c);

  const int64_t layer = (3 * h * h + 3 * h) / t + h * h / t + h + (h * I + I) / t + I * h / t + h + 4 * h;
  const int64_t stage_layers = c.layers / pp;
  int64_t first = (V / t) * h + (c.max_position + c.type_vocab) * h;
  int64_t last = (h * h + h) + 2 * h + V / t;  // MLM transform, its LayerNorm, decoder bias
  if (c.binary_head) last += (h * h + h) + (2 * h + 2);
  (c.pre_ln ? last : first) += 2 * h;  // final LayerNorm, or the embedding LayerNorm (post-LN)
  if (pp == 1) {
    r.parameters_per_rank = first + last + stage_layers * layer;
  } else {
    last += (V / t) * h;  // the last stage's copy of the tied word embedding
    r.parameters_per_rank = std::max(first, last) + stage_layers * layer;
  }

  const double adam_bytes = distributed_optimizer ? 8.0 / dp : 8.0,
               bytes_per_param = 8.0 + adam_bytes + (half && !split_master ? 2 : 0);
  r.bytes_per_rank_weights_grads_optimizer = double(r.parameters_per_rank) * bytes_per_param;

  const double e = half ? 2.0 : 4.0, s = double(seq_length), b = double(micro_batch),
               a = double(c.heads), td = double(tp);
  // The LayerNorm, dropout and residual region (4e + 2 bytes per element) split along the sequence
  // under sequence parallelism.
  const double region = c.sequence_parallel ? td : 1.0;
  const double per_layer =
      s * b * double(h) * ((4 * e + 2) / region + 4 * e / td) + s * b * double(I) * (2 * e / td);
  const double attention_core = a * s * s * b * (2 * e + 1) / td;  // probs, dropped probs, mask
  // Recomputing the attention core keeps one (shared) copy of it instead of one per layer; full
  // recomputation keeps a group's input (2sbh in 16 bits) instead of each recomputed layer's.
  // Per micro-batch in flight and model chunk (the stage's layers, or a chunk's when interleaved).
  const int64_t chunk_layers = stage_layers / chunks;
  const models::RecomputeLayout layout = models::recompute_layout(c, chunk_layers);
  const double recomputed = double(layout.recomputed());
  r.bytes_megatron_activations = (double(chunk_layers) - recomputed) * per_layer +
                                 (c.recompute_attention ? 1.0 : double(chunk_layers) - recomputed) * attention_core +
                                 double(layout.groups.size()) * s * b * double(h) * e;
  const int64_t P = max_predictions > 0 ? max_predictions : (seq_length * 15 + 50) / 100;
  const KilnActivations k = kiln_activations(c, s, b, double(micro_batch * P), td, e);
  // The first stage holds the embeddings, the last the heads (one stage: both).
  const int64_t microbatches = global_batch / (micro_batch * dp);
  const LayerMemory layers = layer_memory(c, chunk_layers, k.per_layer, s * b * double(h) * e, 4.0 * double(layer),
                                          pp == 1 && microbatches == 1);
  r.bytes_activations_per_microbatch =
      layers.kept + k.shared + (pp == 1 ? k.embeddings + k.heads : std::max(k.embeddings, k.heads));
  r.flops_per_step = megatron_bert_flops(c, seq_length, global_batch);

  const int64_t world = int64_t(tp) * pp * dp;
  // The first stage keeps the most micro-batches in flight (each chunk's counted).
  const double in_flight =
      pp == 1 ? 1.0 : double(activations_in_flight(interleaved_one_f_one_b(pp, 0, chunks, microbatches)));
  r.bytes_lent_by_gradients = layers.lent;
  r.bytes_tensors_peak = r.bytes_per_rank_weights_grads_optimizer + in_flight * r.bytes_activations_per_microbatch -
                         r.bytes_lent_by_gradients;
  std::string& x = r.text;
  x += fmt::format("dry run: BERT {} layers x {} hidden, {} heads, FFN {}, {}, seq length {}\n",
                   c.layers, h, c.heads, I, c.pre_ln ? "pre-LN" : "post-LN", seq_length);
  x += fmt::format("  vocab {} padded to {} (multiple of 128 x TP)\n", config.vocab_size, V);
  x += fmt::format("  layout: TP {} x PP {} x DP {}, world size {}; micro batch {}, global batch {}, "
                   "{} micro-batches per step\n", tp, pp, dp, world, micro_batch, global_batch,
                   microbatches);
  x += fmt::format("  parameters: {} ({}); per rank (largest stage): {} ({})\n", r.parameters,
                   millions_or_billions(r.parameters), r.parameters_per_rank,
                   millions_or_billions(r.parameters_per_rank));
  x += fmt::format("  memory per rank: weights + grads + Adam {} ({:g} bytes/param: {}, grad, m, v{})\n",
                   gib(r.bytes_per_rank_weights_grads_optimizer), bytes_per_param,
                   split_master ? "fp32 master as bf16 copy + low halves"
                   : half       ? fmt::format("{} copy, fp32 master", dtype_name(compute))
                                : "fp32 weight",
                   distributed_optimizer && dp > 1 ? fmt::format(" (m, v: a 1/{} shard)", dp) : "");
  x += fmt::format("                   activations {} per micro-batch{} ({} activations, {}{}; {} masked "
                   "positions per sample), up to {} in flight: {}\n",
                   gib(r.bytes_activations_per_microbatch), chunks > 1 ? " and model chunk" : "",
                   half ? dtype_name(compute) : "fp32",
                   recompute_name(c), c.sequence_parallel && tp > 1 ? ", sequence parallel" : "", P, in_flight,
                   gib(in_flight * r.bytes_activations_per_microbatch));
  if (r.bytes_lent_by_gradients > 0)
    x += fmt::format("                   of which {} in the gradients' memory (each layer's gradients hold the "
                     "activations of layers above until backward reaches them)\n",
                     gib(r.bytes_lent_by_gradients));
  x += fmt::format("                   (Megatron's layers would keep {} per micro-batch: Korthikanti et al.'s "
                   "formula, without embeddings and heads)\n",
                   gib(r.bytes_megatron_activations));
  x += fmt::format("  tensors peak per rank (estimate; the console reports the measured 'tensors ... "
                   "(peak ...)'): {}\n", gib(r.bytes_tensors_peak));
  if (pp > 1)
    x += fmt::format("  pipeline bubble: (P - 1) / {} = {} / {} = {:.1f}% of the step's forwards and backwards "
                     "(1F1B{})\n", chunks > 1 ? "(V M)" : "M", pp - 1, chunks * microbatches,
                     100.0 * double(pp - 1) / double(chunks * microbatches),
                     chunks > 1 ? fmt::format(", interleaved: {} model chunks of {} layer{} per stage", chunks, chunk_layers, chunk_layers == 1 ? "" : "s")
                                : "");
  x += fmt::format("  FLOPs per step: {:.3e} (Megatron's formula; {:.3e} per sequence, {:.3e} per "
                   "rank)\n", r.flops_per_step, r.flops_per_step / double(global_batch),
                   r.flops_per_step / double(world));
  return r;
}

}  // namespace kiln::train
