// The performance model (train/dry_run/perf_model.h): a tiny BERT layer's costs worked by hand, the
// table's sums, BERT-large's matrix-product FLOPs against Megatron's formula, ResNet-50's
// convolution FLOPs against the dry run's, layouts, the device names, the JSON, and the CLI.
#include "kiln/train/dry_run/perf_model.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <string>

#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/core/error.h"
#include "kiln/nn/conv2d.h"
#include "kiln/train/dry_run/dry_run.h"
#include "kiln/train/dry_run/perf_ops.h"
#include "kiln/train/dry_run/resnet_dry_run.h"
#include "tests/testing/run_command.h"

namespace kiln::train {
namespace {

// Round numbers: 100 TFLOP/s on the tensor cores, 10 on the CUDA cores, 1 TB/s of HBM, NVLink 100
// GB/s a direction.
constexpr DeviceModel kRound{"round", "a round-number device", 100e12, 50e12, 10e12, 1e12, 100e9, 10e9, 8};

const OpCost& find(const StepModel& step, const std::string& name) {
  const auto it = std::find_if(step.ops.begin(), step.ops.end(), [&](const OpCost& op) { return op.name == name; });
  if (it == step.ops.end()) throw Error("no op {}", name);
  return *it;
}

double class_flops(const StepModel& step, OpClass c) {
  double f = 0;
  for (const OpCost& op : step.ops)
    if (op.cls == c) f += op.calls * op.flops;
  return f;
}

// One post-LN layer: H 4, 2 heads of d 2, FFN 8, one sample of S 2 (N 2 rows), bf16 (e 2), one
// micro-batch, dropout on.
BertPerfRun tiny_bert() {
  BertPerfRun r;
  r.model.vocab_size = 16, r.model.hidden = 4, r.model.layers = 1, r.model.heads = 2, r.model.intermediate = 8;
  r.model.max_position = 2, r.model.type_vocab = 2;
  r.seq_length = 2, r.micro_batch = 1, r.global_batch = 1, r.max_predictions = 1;
  r.compute = DType::bf16;
  return r;
}

TEST(PerfModel, TinyBertLayerCostsMatchTheHandCount) {
  const StepModel step = bert_step_model(tiny_bert(), kRound);
  // query: x (2, 4) x W^T (4, 4) + b: 2 M N K = 2 x 2 x 4 x 4 = 64 FLOPs; x 16 B + W 32 B + y 16 B +
  // bias 8 B = 72 B. At 1 TB/s 72 ps, against 0.64 ps of tensor-core time: memory-bound.
  const OpCost& q = find(step, "layer.attention.query.forward");
  EXPECT_DOUBLE_EQ(q.flops, 64);
  EXPECT_DOUBLE_EQ(q.bytes, 72);
  EXPECT_DOUBLE_EQ(q.seconds, 72e-12);
  EXPECT_EQ(q.calls, 1);
  // scores: 2 heads of (2, 2) x (2, 2): 2 x 2 x 2 x 2 x 2 = 32 FLOPs; q 16 B + k 16 B + f32 scores
  // 2 x 2 x 2 x 4 = 32 B.
  const OpCost& scores = find(step, "layer.attention.scores");
  EXPECT_DOUBLE_EQ(scores.flops, 32);
  EXPECT_DOUBLE_EQ(scores.bytes, 64);
  // softmax + dropout over Z = 8 scores: f32 scores 32 B + mask 8 B read, probs and dropped probs
  // 16 B each written; 6 FLOPs an element.
  const OpCost& probs = find(step, "layer.attention.probs_dropout");
  EXPECT_DOUBLE_EQ(probs.bytes, 72);
  EXPECT_DOUBLE_EQ(probs.flops, 48);
  // intermediate: (2, 4) x (4, 8): 128 FLOPs; x 16 + W 64 + y 32 + bias 16 = 128 B.
  const OpCost& fc1 = find(step, "layer.intermediate.forward");
  EXPECT_DOUBLE_EQ(fc1.flops, 128);
  EXPECT_DOUBLE_EQ(fc1.bytes, 128);
  // GELU over 16 elements: 16 x 2 B read + written = 64 B.
  EXPECT_DOUBLE_EQ(find(step, "layer.gelu.forward").bytes, 64);
  // LN(a + m): a, m read, the join and y written (4 x 8 x 2 = 64 B), mean / rstd 2 x 8 B, weight
  // and bias 2 x 4 x 2 B: 96 B.
  EXPECT_DOUBLE_EQ(find(step, "layer.output_norm.forward").bytes, 96);
  // dW of output (4, 8) f32 = dy^T (4, 2) x g (2, 8): 128 FLOPs; dy 16 + g 32 + dW 128 B.
  const OpCost& dw = find(step, "layer.output.backward_weights");
  EXPECT_DOUBLE_EQ(dw.flops, 128);
  EXPECT_DOUBLE_EQ(dw.bytes, 176);
  EXPECT_DOUBLE_EQ(dw.seconds, 176e-12);
  // bias gradient of (2, 4) in the weight gradient's product (dy read there): 4 f32 sums written
  // and read, db read and written: 64 B.
  EXPECT_DOUBLE_EQ(find(step, "layer.output.bias_grad").bytes, 64);
  // LN backward (2, 4): dy, x read, dx written 48 B; mean / rstd 16; weight 8; one chunk of (4 x 2)
  // f32 partials written and read 64; dW, dB read and written 64: 200 B.
  EXPECT_DOUBLE_EQ(find(step, "layer.output_norm.backward").bytes, 200);
}

TEST(PerfModel, RooflineTakesTheSlowerOfArithmeticMemoryAndLink) {
  std::vector<OpCost> ops(3);
  ops[0].math = Math::tensor16, ops[0].flops = 1e12, ops[0].bytes = 1e9;  // 10 ms of math, 1 ms of HBM
  ops[1].math = Math::fp32, ops[1].flops = 1e9, ops[1].bytes = 1e9;       // 0.1 ms of math, 1 ms of HBM
  ops[2].bytes = 2e9, ops[2].link_bytes = 1e9;                           // 2 ms of HBM, 10 ms of NVLink
  apply_roofline(ops, kRound);
  EXPECT_DOUBLE_EQ(ops[0].seconds, 10e-3);
  EXPECT_DOUBLE_EQ(ops[1].seconds, 1e-3);
  EXPECT_DOUBLE_EQ(ops[2].seconds, 10e-3);
}

// The unfused attention core's rows, which the tests below count (--attention-backend unfused).
BertPerfRun bert_large(int64_t batch) {
  BertPerfRun r;  // BertConfig's defaults are BERT-large: 24 x 1024, 16 heads, FFN 4096, vocab 30522
  r.seq_length = 512, r.micro_batch = batch, r.global_batch = batch, r.max_predictions = 76;
  r.compute = DType::bf16;
  r.model.attention_core = nn::AttentionCore::unfused;
  return r;
}

// Megatron's formula (train/dry_run/dry_run.h) counts the decoder over every token, the attention core as
// causal (half), and neither the MLM transform nor the pooler and NSP head; kiln runs the
// decoder and transform over the masked rows only.
TEST(PerfModel, BertLargeMatmulFlopsAreMegatronsUpToTheHeads) {
  const BertPerfRun r = bert_large(16);
  const StepModel step = bert_step_model(r, device_model("h200"));
  const double B = 16, s = 512, h = 1024, L = 24, V = 30522, P = 76;
  const double explained = 6 * B * s * s * h * L    // bidirectional attention: the other half
                           - 6 * B * s * h * V      // decoder: masked rows, not every token
                           + 6 * B * P * h * V      //
                           + 6 * B * P * h * h      // MLM transform
                           + 6 * B * (h * h + 2 * h);  // pooler, seq_relationship
  EXPECT_NEAR(step.model_flops / (megatron_bert_flops(r.model, 512, 16) + explained), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(class_flops(step, OpClass::gemm) + class_flops(step, OpClass::attention) -
                       [&] {
                         double rows = 0;  // softmax and dropout FLOPs are counted but are not matmuls
                         for (const OpCost& op : step.ops)
                           if (op.cls == OpClass::attention && !op.model_flops) rows += op.calls * op.flops;
                         return rows;
                       }(),
                   step.model_flops);
}

TEST(PerfModel, RecomputedAttentionAddsScoresButNoModelFlops) {
  BertPerfRun r = bert_large(16);
  const StepModel plain = bert_step_model(r, device_model("h200"));
  r.model.recompute_attention = true;
  const StepModel recomputed = bert_step_model(r, device_model("h200"));
  EXPECT_DOUBLE_EQ(recomputed.model_flops, plain.model_flops);
  // The scores again: 2 B S^2 H per layer.
  const double scores = 2.0 * 16 * 512 * 512 * 1024 * 24;
  EXPECT_NEAR(class_flops(recomputed, OpClass::attention) - class_flops(plain, OpClass::attention),
              scores + 16.0 * 16 * 512 * 512 * 24 * 5, 1e3);  // + the softmax's 5 FLOPs a score
}

TEST(PerfModel, TableTotalIsTheSumOfTheOps) {
  const DeviceModel& h200 = device_model("h200");
  const StepModel step = bert_step_model(bert_large(16), h200);
  double sum = 0;
  for (const OpCost& op : step.ops) sum += op.calls * op.seconds;
  EXPECT_DOUBLE_EQ(step.seconds(), sum);
  const std::string table = format_step_table(step, h200);
  // Every class row's ms (4th number) adds up to the step row's, within the table's rounding.
  const std::regex row(R"(\n    ([A-Za-z][^\n]*?)\s+([0-9]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)%)");
  double classes = 0, total = -1;
  int rows = 0;
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row); it != std::sregex_iterator(); ++it) {
    const std::string label = (*it)[1];
    if (label.starts_with("attention core fused")) continue;
    const double ms = std::stod((*it)[5]);
    if (label.starts_with("step")) total = ms;
    else classes += ms, ++rows;
  }
  EXPECT_GE(rows, 7) << table;
  EXPECT_NEAR(total, sum * 1e3, 0.005) << table;
  EXPECT_NEAR(classes, total, 0.005 * rows) << table;
  const std::string list = format_op_list(step);  // one line per op, and a header
  EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), int64_t(step.ops.size()) + 1);
  EXPECT_NE(list.find("layer.attention.scores"), std::string::npos) << list;
}

// Without attention dropout; with it, the forward writes a keep bit an element and each backward pass
// reads them (1/16 of a bf16 S x S tensor, thrice).
TEST(PerfModel, FusedAttentionMovesNoScoresSoItsBytesGrowLinearlyInS) {
  const auto bytes = [](int64_t S, bool fused, float dropout) {
    BertPerfRun r = bert_large(4);
    r.seq_length = S;
    r.model.attention_dropout = dropout;
    const StepModel step = bert_step_model(r, device_model("h100"));
    double b = 0;
    for (const OpCost& op : fused ? step.fused_attention : step.ops)
      if (op.cls == OpClass::attention) b += op.calls * op.bytes;
    return b;
  };
  EXPECT_NEAR(bytes(512, true, 0.0f) / bytes(256, true, 0.0f), 2.0, 1e-12);
  EXPECT_GT(bytes(512, false, 0.1f) / bytes(256, false, 0.1f), 3.5);  // S x S tensors: 4x
  EXPECT_LT(bytes(512, true, 0.1f) * 6, bytes(512, false, 0.1f));  // two passes over q, k, v, o, dO and the bits
  const double bits = 4.0 * 16 * 512 * (512 / 32) * 4, layers = 24;
  EXPECT_DOUBLE_EQ(bytes(512, true, 0.1f) - bytes(512, true, 0.0f), layers * 3 * bits);
}

// Where the run takes the fused core (auto in bf16 with head dim 64, or asked for), its rows
// replace the unfused ones: no S x S bytes, the same model FLOPs (4 d Z forward, 8 d Z backward),
// backward's recomputation (6 d Z) outside them, and nothing for selective recomputation to redo.
TEST(PerfModel, ChosenFusedAttentionReplacesTheUnfusedRows) {
  const DeviceModel& h100 = device_model("h100");
  const StepModel unfused = bert_step_model(bert_large(16), h100);
  for (nn::AttentionCore core : {nn::AttentionCore::automatic, nn::AttentionCore::fused}) {
    BertPerfRun r = bert_large(16);
    r.model.attention_core = core;
    const StepModel fused = bert_step_model(r, h100);
    EXPECT_THROW(find(fused, "layer.attention.scores"), Error);
    EXPECT_TRUE(fused.fused_attention.empty());
    EXPECT_DOUBLE_EQ(fused.model_flops, unfused.model_flops);
    const double Z = 16.0 * 16 * 512 * 512, d = 64, layers = 24;
    EXPECT_DOUBLE_EQ(find(fused, "layer.attention.fused_forward").flops * layers, 4 * Z * d * layers);
    EXPECT_DOUBLE_EQ(find(fused, "layer.attention.fused_backward.recompute").flops, 6 * Z * d);
    double bytes = 0;
    for (const OpCost& op : fused.ops)
      if (op.cls == OpClass::attention) bytes += op.calls * op.bytes;
    // Per layer: forward q, k, v, context; backward's key pass k, v, q, dO, context, dk, dv and query
    // pass q, dO, context, k, v, dq: 17 (N, H) bf16 tensors; the lse, the mask and the keep bits
    // (B heads S (S / 32) words) thrice.
    const double qkv = 16.0 * 512 * 1024 * 2, lse = 16.0 * 16 * 512 * 4, mask = 16.0 * 512 * 4,
                 bits = 16.0 * 16 * 512 * 16 * 4;
    EXPECT_DOUBLE_EQ(bytes, layers * (17 * qkv + 3 * lse + 3 * mask + 3 * bits));
    r.model.recompute_attention = true;
    EXPECT_DOUBLE_EQ(bert_step_model(r, h100).seconds(), fused.seconds());
  }
  BertPerfRun f32 = bert_large(16);
  f32.compute = DType::f32;
  f32.model.attention_core = nn::AttentionCore::automatic;
  EXPECT_NO_THROW(find(bert_step_model(f32, h100), "layer.attention.scores"));  // auto: f32 stays unfused
}

TEST(PerfModel, LayoutsSplitTheWorkAndAddTheirExchanges) {
  const DeviceModel& h100 = device_model("h100");
  BertPerfRun r = bert_large(8);
  const StepModel one = bert_step_model(r, h100);
  r.tp = 2, r.dp = 2, r.global_batch = 32;  // 2 micro-batches of 8 per data-parallel rank
  const StepModel split = bert_step_model(r, h100);
  const OpCost& q1 = find(one, "layer.attention.query.forward");
  const OpCost& q2 = find(split, "layer.attention.query.forward");
  EXPECT_DOUBLE_EQ(q2.flops * 2, q1.flops);
  EXPECT_DOUBLE_EQ(q2.calls, 2 * q1.calls);
  EXPECT_EQ(split.world, 4);
  EXPECT_NEAR(split.model_flops / one.model_flops, 4.0, 1e-12);  // 4x the samples
  EXPECT_GT(find(split, "layer.output.all_reduce").link_bytes, 0);
  // Ring all-reduce of the rank's f32 gradients over 2 ranks: 2 x 1/2 x 4 bytes a parameter.
  const OpCost& grads = find(split, "dp.grad_all_reduce");
  EXPECT_DOUBLE_EQ(grads.link_bytes, grads.bytes / 2);
  r.tp = 1, r.dp = 1, r.pp = 2, r.global_batch = 16;
  const StepModel piped = bert_step_model(r, h100);
  EXPECT_DOUBLE_EQ(find(piped, "layer.attention.query.forward").calls, 12 * 2);
  EXPECT_GT(find(piped, "pp.bubble").seconds, 0);
  // Interleaved, 2 chunks: the bubble halves and the busiest stage's activations go round twice.
  r.chunks = 2;
  const StepModel interleaved = bert_step_model(r, h100);
  // (A micro-batch's time on the busiest stage grows by its extra exchanges.)
  EXPECT_NEAR(find(interleaved, "pp.bubble").seconds / find(piped, "pp.bubble").seconds, 0.5, 0.01);
  EXPECT_DOUBLE_EQ(find(interleaved, "layer.attention.query.forward").calls, 12 * 2);
  EXPECT_DOUBLE_EQ(find(interleaved, "pp.send_input_grad").calls, 2 * find(piped, "pp.send_input_grad").calls);
  EXPECT_THROW(bert_step_model({.model = r.model, .seq_length = 512, .micro_batch = 3, .global_batch = 16}, h100),
               Error);
}

TEST(PerfModel, ResNet50ConvFlopsMatchTheDryRun) {
  const ResNetPerfRun r{.model = models::ResNetConfig::resnet50(), .image = 224, .batch = 128, .compute = DType::bf16};
  const StepModel step = resnet_step_model(r, device_model("h200"));
  // The dry run counts 3 x the forward, the stem's input gradient among them, which kiln skips.
  const double stem = double(nn::conv2d_flops(models::resnet_stem_conv(r.model), 224, 224)) * 128;
  const double dry = resnet_dry_run(r.model, "resnet50", 224, 128, 128, 1, false, DType::bf16).flops_per_step;
  EXPECT_NEAR((class_flops(step, OpClass::gemm) + stem) / dry, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(step.model_flops, class_flops(step, OpClass::gemm));
  // 53 convolutions (49 + 4 downsample), each a forward, a weight and (but the stem) a data gradient.
  int convs = 0;
  for (const OpCost& op : step.ops) convs += op.name.ends_with(".backward_weights") && op.name != "fc.backward_weights";
  EXPECT_EQ(convs, 53);
  EXPECT_THROW(find(step, "conv1.backward_data"), Error);
}

// The model's copy of a kernel's constant (train/ includes nothing of backend/cuda/).
TEST(PerfModel, ScatterSortSlicesAreTheKernels) { EXPECT_EQ(perf::kScatterRankSlice, ops::cuda::kRankSlice); }

TEST(PerfModel, UnknownDeviceIsRefusedNamingTheKnownOnes) {
  try {
    device_model("b200");
    FAIL() << "b200 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: h200, h100, a100"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_device_model_setting("h300", true, false), Error);
  EXPECT_THROW(check_device_model_setting("h200", false, false), Error);  // only with a dry run
  EXPECT_THROW(check_device_model_setting("", true, true), Error);         // --json needs a device model
  EXPECT_NO_THROW(check_device_model_setting("", false, false));
  EXPECT_NO_THROW(check_device_model_setting("h100", true, true));
  EXPECT_EQ(device_model("a100").hbm, 2.039e12);
}

TEST(PerfModel, CliPrintsTheTableAfterTheDryRun) {
  const std::string kiln = std::string(KILN_BINARY) + " train ";
  const auto [status, out] = testing::run_command(kiln + "bert --config " KILN_SOURCE_DIR
                                                  "/configs/bert-large.toml --dry-run --device-model h200");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("FLOPs per step"), std::string::npos) << out;  // the dry run's text first
  EXPECT_NE(out.find("expected step on NVIDIA H200 SXM"), std::string::npos) << out;
  EXPECT_NE(out.find("op class"), std::string::npos) << out;
  const auto [resnet_status, resnet] = testing::run_command(
      kiln + "resnet --config " KILN_SOURCE_DIR "/configs/resnet50.toml --dry-run --device-model a100 --bf16 --batch-size 128");
  EXPECT_EQ(resnet_status, 0) << resnet;
  EXPECT_NE(resnet.find("expected step on NVIDIA A100 SXM 80GB"), std::string::npos) << resnet;
  const auto [bad_status, bad] = testing::run_command(kiln + "bert --config " KILN_SOURCE_DIR
                                                      "/configs/bert-large.toml --dry-run --device-model b200");
  EXPECT_NE(bad_status, 0);
  EXPECT_NE(bad.find("known: h200, h100, a100"), std::string::npos) << bad;
  EXPECT_EQ(std::count(bad.begin(), bad.end(), '\n'), 1) << bad;
}

TEST(PerfModel, JsonHoldsTheTablesStepClassesAndOps) {
  const DeviceModel& h200 = device_model("h200");
  const StepModel step = bert_step_model(bert_large(16), h200);
  const auto j = nlohmann::json::parse(format_step_json(step, h200));
  EXPECT_EQ(j["device"], "h200");
  EXPECT_NEAR(j["step_ms"].get<double>(), step.seconds() * 1e3, 1e-9);
  EXPECT_DOUBLE_EQ(j["peak_tflops"].get<double>(), 989.0);  // what the GPU check's rows are held to
  EXPECT_DOUBLE_EQ(j["hbm_gb_s"].get<double>(), 4800.0);
  double classes = 0;
  for (const auto& [key, ms] : j["classes"].items()) classes += ms.get<double>();
  EXPECT_NEAR(classes, step.seconds() * 1e3, 1e-6);
  EXPECT_GT(j["classes"]["gemm"].get<double>(), 0.0);
  EXPECT_GT(j["classes"]["attention"].get<double>(), 0.0);
  ASSERT_EQ(j["ops"].size(), step.ops.size());
  EXPECT_EQ(j["ops"][0]["name"], step.ops[0].name);
  EXPECT_EQ(j["ops"][0]["class"], op_class_key(step.ops[0].cls));
}

TEST(PerfModel, CliPrintsOnlyTheJsonWithJson) {
  const std::string kiln = std::string(KILN_BINARY) + " train ";
  const auto [status, out] = testing::run_command(  // stdout alone: the JSON
      "{ " + kiln + "resnet --config " KILN_SOURCE_DIR "/configs/resnet50.toml --dry-run --device-model h100 "
      "--bf16 --batch-size 128 --json 2>/dev/null; }");
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["device"], "h100");
  EXPECT_GT(j["classes"]["gemm"].get<double>(), 0.0);
  const auto [bad_status, bad] = testing::run_command(kiln + "bert --config " KILN_SOURCE_DIR
                                                      "/configs/bert-large.toml --dry-run --json");
  EXPECT_NE(bad_status, 0);
  EXPECT_NE(bad.find("--json"), std::string::npos) << bad;
}

}  // namespace
}  // namespace kiln::train
