#include "kiln/train/dry_run/dry_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kiln/core/error.h"

namespace kiln::train {
namespace {

models::BertConfig megatron_shape(int64_t layers, int64_t hidden, int64_t heads) {
  models::BertConfig c;
  c.vocab_size = 30522;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.intermediate = 4 * hidden;
  c.max_position = 512;
  c.pre_ln = true;
  c.binary_head = true;
  return c;
}

// specs/megatron-bert.md 2.4, tied embeddings with the SOP head (f = 4h, P = 512):
// N = V h + P h + 2h + L (12h^2 + 13h) + 2h + (h^2 + 3h) + V + (h^2 + h) + (2h + 2).
int64_t spec_param_count(int64_t V, int64_t h, int64_t L) {
  const int64_t P = 512;
  return V * h + P * h + 2 * h + L * (12 * h * h + 13 * h) + 2 * h + (h * h + 3 * h) + V +
         (h * h + h) + (2 * h + 2);
}

TEST(DryRun, PadsTheVocabLikeMegatron) {
  EXPECT_EQ(megatron_padded_vocab(30522, 1), 30592);
  EXPECT_EQ(megatron_padded_vocab(30522, 2), 30720);
  EXPECT_EQ(megatron_padded_vocab(30522, 8), 30720);
  EXPECT_EQ(megatron_padded_vocab(28996, 1), 29056);  // the NGC BERT-345M checkpoint's 29056 rows
  EXPECT_EQ(megatron_padded_vocab(30592, 1), 30592);
}

TEST(DryRun, ParameterCountsMatchTheSpecFormulaAndPublishedSizes) {
  struct Case {
    int64_t layers, hidden, heads;
    int tp;
    int64_t padded_vocab;
    double published;
  };
  const Case cases[] = {{24, 1024, 16, 1, 30592, 336.3e6},   // "340M"
                        {48, 2560, 32, 1, 30592, 3.87e9},    // "4B"
                        {48, 6144, 96, 4, 30720, 21.9e9}};   // "20B" at TP4
  for (const Case& k : cases) {
    const models::BertConfig c = megatron_shape(k.layers, k.hidden, k.heads);
    const DryRunReport r = bert_dry_run(c, 512, 4, 32, k.tp, 1, 1);
    const int64_t expected = spec_param_count(k.padded_vocab, k.hidden, k.layers);
    EXPECT_EQ(r.parameters, expected) << k.hidden;
    // The spec's sizes are rounded (its "21.9B" is 0.5% under its own formula's 22.01B).
    EXPECT_NEAR(double(r.parameters) / k.published, 1.0, 0.01) << k.hidden;
  }
  EXPECT_EQ(spec_param_count(30592, 1024, 24), 336297858);
}

TEST(DryRun, SingleRankHoldsEverything) {
  const models::BertConfig c = megatron_shape(24, 1024, 16);
  const DryRunReport fp32 = bert_dry_run(c, 512, 4, 32);
  EXPECT_EQ(fp32.parameters_per_rank, fp32.parameters);
  EXPECT_DOUBLE_EQ(fp32.bytes_per_rank_weights_grads_optimizer, 16.0 * double(fp32.parameters));
  const DryRunReport bf16 = bert_dry_run(c, 512, 4, 32, 1, 1, 1, DType::bf16);
  EXPECT_DOUBLE_EQ(bf16.bytes_per_rank_weights_grads_optimizer, 18.0 * double(bf16.parameters));
  // One rank, no pipeline: one micro-batch of activations in flight.
  EXPECT_DOUBLE_EQ(fp32.bytes_tensors_peak,
                   fp32.bytes_per_rank_weights_grads_optimizer + fp32.bytes_activations_per_microbatch);
}

// ZeRO-1: each data-parallel rank keeps a 1/DP shard of Adam's m and v, the rest whole.
TEST(DryRun, TheDistributedOptimizerShardsOnlyTheAdamState) {
  const models::BertConfig c = megatron_shape(24, 1024, 16);
  const DryRunReport plain = bert_dry_run(c, 512, 4, 32, 1, 1, 4, DType::bf16);
  const DryRunReport zero = bert_dry_run(c, 512, 4, 32, 1, 1, 4, DType::bf16, 0, true);
  EXPECT_DOUBLE_EQ(zero.bytes_per_rank_weights_grads_optimizer, (18.0 - 6.0) * double(zero.parameters));
  EXPECT_DOUBLE_EQ(plain.bytes_tensors_peak - zero.bytes_tensors_peak, 6.0 * double(zero.parameters));
  EXPECT_NE(zero.text.find("m, v: a 1/4 shard"), std::string::npos) << zero.text;
  EXPECT_DOUBLE_EQ(bert_dry_run(c, 512, 4, 32, 1, 1, 1, DType::bf16, 0, true).bytes_tensors_peak,
                   bert_dry_run(c, 512, 4, 32, 1, 1, 1, DType::bf16).bytes_tensors_peak);  // one rank: nothing to shard
}

TEST(DryRun, TensorParallelSplitsOnlyTheShardedWeights) {
  const models::BertConfig c = megatron_shape(24, 1024, 16);
  const int64_t h = 1024, I = 4096, L = 24, V = 30720;  // padded for TP 2
  // Split over TP: word embedding, decoder bias, QKV (w, b), proj w, FC1 (w, b), FC2 w.
  const int64_t sharded = V * h + V + L * (3 * h * h + 3 * h + h * h + h * I + I + I * h);
  const DryRunReport r = bert_dry_run(c, 512, 4, 32, 2, 1, 1);
  EXPECT_EQ(r.parameters_per_rank, r.parameters - sharded / 2);
}

TEST(DryRun, PipelineStageCountsForTheTwentyBillionLayout) {
  // TP4 x PP4: the last stage (heads + its tied-embedding copy) outweighs the first; 12 layers
  // per stage. Expected from an independent Python computation:
  //   layer/rank = (4h^2 + 2hI + 3h + I)/4 + 6h, first = V h/4 + 512 h + 2h,
  //   last = 2h + 2(h^2 + h) + 2h + V/4 + 2h + 2 + V h/4.
  const models::BertConfig c = megatron_shape(48, 6144, 96);
  const DryRunReport r = bert_dry_run(c, 512, 1, 64, 4, 4, 2, DType::bf16);
  EXPECT_EQ(r.parameters_per_rank, 1482266114);
  EXPECT_DOUBLE_EQ(r.bytes_per_rank_weights_grads_optimizer, 18.0 * 1482266114.0);
}

// Interleaved 1F1B (PP4, 24 layers in chunks of 3, 8 micro-batches): the first stage holds
// 2 (P - 1) + (V - 1) P + 1 = 11 micro-batch chunks at once (of 3 layers each) against 4 whole
// stages (6 layers each) without interleaving, and the bubble is (P - 1) / (V M).
TEST(DryRun, InterleavedStagesHoldMoreSmallerChunksAndShowTheirBubble) {
  const models::BertConfig c = megatron_shape(24, 1024, 16);
  const DryRunReport plain = bert_dry_run(c, 512, 4, 32, 1, 4, 1, DType::bf16);
  const DryRunReport interleaved = bert_dry_run(c, 512, 4, 32, 1, 4, 1, DType::bf16, 0, false, false, 2);
  EXPECT_EQ(interleaved.parameters_per_rank, plain.parameters_per_rank);
  EXPECT_LT(interleaved.bytes_activations_per_microbatch, plain.bytes_activations_per_microbatch);
  EXPECT_NE(plain.text.find("up to 4 in flight"), std::string::npos) << plain.text;
  EXPECT_NE(interleaved.text.find("up to 11 in flight"), std::string::npos) << interleaved.text;
  EXPECT_NE(plain.text.find("pipeline bubble: (P - 1) / M = 3 / 8 = 37.5%"), std::string::npos) << plain.text;
  EXPECT_NE(interleaved.text.find("pipeline bubble: (P - 1) / (V M) = 3 / 16 = 18.8%"), std::string::npos)
      << interleaved.text;
  EXPECT_THROW(bert_dry_run(c, 512, 4, 32, 1, 4, 1, DType::bf16, 0, false, false, 4), Error);  // 6 layers / 4
}

TEST(DryRun, FlopsFollowMegatronsFormula) {
  const models::BertConfig c = megatron_shape(24, 1024, 16);
  const DryRunReport r = bert_dry_run(c, 512, 4, 32);
  const double B = 32, s = 512, L = 24, h = 1024, V = 30592;
  const double expected = 72 * B * s * L * h * h * (1 + s / (12 * h) + V / (12 * L * h));
  EXPECT_NEAR(r.flops_per_step / expected, 1.0, 1e-12);
  // specs/megatron-bert.md 7.2: ~1.06e12 FLOPs per BERT-Large sequence.
  EXPECT_NEAR(r.flops_per_step / B / 1.06e12, 1.0, 0.005);
  // Parallel layout does not change the work of a step.
  EXPECT_DOUBLE_EQ(bert_dry_run(c, 512, 4, 32, 2, 2, 2).flops_per_step,
                   bert_dry_run(c, 512, 4, 32, 2, 1, 1).flops_per_step);
}

TEST(DryRun, ActivationsFollowKorthikantiEquation) {
  const models::BertConfig c = megatron_shape(24, 1024, 16);
  const double s = 512, b = 4, h = 1024, a = 16;
  for (int t : {1, 2, 4}) {
    // 16-bit, f = 4h: s b h (10 + 24/t + 5 a s / (h t)) per layer.
    const double paper = 24 * s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t));
    EXPECT_NEAR(bert_dry_run(c, 512, 4, 32, t, 1, 1, DType::bf16).bytes_megatron_activations / paper,
                1.0, 1e-12);
  }
  // fp32 activations: 16-bit tensors double, dropout masks stay one byte; PP 2 halves the layers.
  const double fp32 = 12 * s * b * h * (18 + 48.0 / 2 + 9 * a * s / (h * 2));
  EXPECT_NEAR(bert_dry_run(c, 512, 4, 32, 2, 2, 1).bytes_megatron_activations / fp32, 1.0,
              1e-12);
}

TEST(DryRun, TextSummarisesTheNumbers) {
  const DryRunReport r = bert_dry_run(megatron_shape(48, 2560, 32), 512, 4, 32);
  EXPECT_NE(r.text.find("3869260674"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("30522 padded to 30592"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("8 micro-batches"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("tensors peak per rank"), std::string::npos) << r.text;
  EXPECT_EQ(r.text.back(), '\n');
}

TEST(DryRun, ImpossibleLayoutsAreErrorsNamingTheSetting) {
  const models::BertConfig c = megatron_shape(24, 1024, 16);
  auto message = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  // Megatron's 340M script asks for PP 16 with 24 layers.
  EXPECT_NE(message([&] { bert_dry_run(c, 512, 4, 32, 8, 16, 1); }).find("pipeline"),
            std::string::npos);
  EXPECT_NE(message([&] { bert_dry_run(c, 512, 4, 32, 3, 1, 1); }).find("tensor"),
            std::string::npos);
  EXPECT_NE(message([&] { bert_dry_run(c, 512, 4, 30, 1, 1, 2); }).find("global batch"),
            std::string::npos);
  EXPECT_NE(message([&] { bert_dry_run(c, 1024, 4, 32); }).find("max position"), std::string::npos);
  EXPECT_NE(message([&] { bert_dry_run(c, 512, 0, 32); }).find("micro batch"), std::string::npos);
}

}  // namespace
}  // namespace kiln::train
