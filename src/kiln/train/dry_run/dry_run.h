// train/dry_run/dry_run.h — `kiln train bert --dry-run`: what a BERT configuration costs, without
// allocating it. Parameter counts, bytes per rank and FLOPs per step for a Megatron layout.
//
// Vocabulary: padded as Megatron pads it, to a multiple of 128 x TP (30522 -> 30592 at TP 1,
// 30720 at TP 2/4/8); the padded rows are real parameters.
// Parameters per rank: the largest pipeline stage. Stage 0 holds the embeddings (word rows split
// over TP), the last stage the final LayerNorm, the heads and, when PP > 1, its own copy of the
// tied word embedding (not counted in `parameters`). In a layer, QKV / FC1 (weights and biases)
// and proj / FC2 weights are split over TP; their output biases and the LayerNorms are replicated.
// Weights, gradients, optimizer (Megatron's mixed-precision Adam, no distributed optimizer):
// fp32 master weight + fp32 gradient + Adam m + v = 16 bytes per parameter, plus a 2-byte
// model copy with bf16 = 18 bytes; 16 again where the master weights are split into that copy
// and their low halves (bf16 on the CPU: nn/params.h). Data parallelism replicates all of it,
// except the Adam state under the distributed optimizer (ZeRO-1: each data-parallel rank holds
// 8 / DP bytes of it).
// Activations per micro-batch: kiln's own buffers (dry_run.cc, kiln_activations): per layer what
// backward reads (4 s b h e + 4 s b h e/t + 2 s b I e/t + the probabilities a s^2 b e/t, e the
// compute dtype's bytes, f32 statistics), once per stage what the layers share
// (nn::LayerSharedBuffers: forward outputs read once, every gradient, the core's f32 gradients),
// and the embeddings' and heads' buffers, the MLM logits (b P x V f32) and their gradients among
// them (P masked positions per sample: --max-predictions, else 0.15 s). For comparison, Megatron's
// (Korthikanti et al. 2022, eq. 2 with tensor parallelism, no sequence parallelism, no
// recomputation, generalised to an FFN size I and e-byte activations, dropout masks 1 byte):
//   s b h (4e + 2 + 4e/t) + s b I (2e/t) + a s^2 b (2e + 1)/t
// per layer (e = 2, I = 4h gives the paper's s b h (10 + 24/t + 5 a s/(h t))). With 1F1B the
// first stage holds up to min(PP, micro-batches) micro-batches of activations at once.
// Tensors peak (the name the console's memory field uses): weights + grads + optimizer +
// activations in flight. The measured peak adds per-op scratch; RSS adds the program, libraries
// and the data pipeline.
// FLOPs per step: Megatron's model-FLOPs formula (specs/megatron-bert.md 7.2), B = global batch:
//   B s [ 6 (4h^2) L + 6 (2 h I) L + 6 h V ] + 6 B s^2 h L
// (= 72 B s L h^2 (1 + s/(12h) + V/(12 L h)) for I = 4h). Its attention term assumes a causal
// mask, so it under-counts bidirectional BERT by 6 B s^2 h L; kept for comparable TFLOP/s.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/core/dtype.h"
#include "kiln/models/bert.h"

namespace kiln::train {

struct DryRunReport {
  int64_t parameters = 0, parameters_per_rank = 0;
  double bytes_per_rank_weights_grads_optimizer = 0;
  double bytes_activations_per_microbatch = 0;  // kiln's buffers (below)
  double bytes_megatron_activations = 0;        // Korthikanti et al.'s formula, for comparison
  // Of the activations, what lives in the gradients' memory (nn/grad_loan.h: the whole model, one
  // micro-batch a step): every layer's gradients but the last layer's.
  double bytes_lent_by_gradients = 0;
  // Weights + grads + optimizer + the activations in flight: the estimate of the console's
  // "tensors ... (peak ...)" (train/run_report.h MemoryUse::tensors_peak) for one rank.
  double bytes_tensors_peak = 0;
  double flops_per_step = 0;
  std::string text;  // the human-readable summary, several lines, ending in '\n'
};

// "25.6M", "1.23B"; "1.50 GiB" (the dry runs' text).
std::string millions_or_billions(int64_t n);
std::string gib(double bytes);
// Throws kiln::Error "dry run: WHAT must be at least 1, got V" when v < 1.
void require_positive(int64_t v, const char* what);

// ceil(vocab / (divisible_by * tp)) * divisible_by * tp (--make-vocab-size-divisible-by).
int64_t megatron_padded_vocab(int64_t vocab, int tp, int64_t divisible_by = 128);

// Megatron's FLOPs per iteration (formula above) with `config.vocab_size` taken as given
// (pass the padded size).
double megatron_bert_flops(const models::BertConfig& config, int64_t seq_length, int64_t global_batch);

// Throws kiln::Error when the layout is impossible (layers not divisible by pp, heads or FFN
// size not divisible by tp, global batch not a multiple of micro_batch x dp, seq_length above
// max_position, a size < 1), naming the setting.
DryRunReport bert_dry_run(const models::BertConfig& config, int64_t seq_length, int64_t micro_batch,
                          int64_t global_batch, int tp = 1, int pp = 1, int dp = 1, DType compute = DType::f32,
                          int64_t max_predictions = 0, bool distributed_optimizer = false,
                          bool split_master = false, int chunks = 1);

}  // namespace kiln::train
