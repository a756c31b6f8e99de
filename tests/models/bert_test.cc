#include "kiln/models/bert.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

#include "kiln/core/allocator.h"
#include "kiln/core/error.h"
#include "kiln/core/philox.h"

namespace kiln::models {
namespace {

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 64;
  c.hidden = 32;
  c.layers = 2;
  c.heads = 4;
  c.intermediate = 64;
  c.max_position = 32;
  c.hidden_dropout = c.attention_dropout = 0.0f;
  return c;
}

// Rows of lengths[b] tokens (the rest padding) with npred[b] masked slots each.
data::BertBatch make_batch(const std::vector<int>& lengths, const std::vector<int>& npred, int S,
                           int P, int vocab, uint64_t seed) {
  const RngStream rng{seed, rng_stream(RngPurpose::test, 0, 0)};
  uint64_t k = 0;
  data::BertBatch b;
  b.batch = int(lengths.size());
  b.seq_len = S;
  b.max_pred = P;
  b.input_ids.assign(size_t(b.batch) * S, 0);
  b.segment_ids.assign(size_t(b.batch) * S, 0);
  b.input_mask.assign(size_t(b.batch) * S, 0);
  b.masked_positions.assign(size_t(b.batch) * P, 0);
  b.masked_ids.assign(size_t(b.batch) * P, 0);
  b.masked_weights.assign(size_t(b.batch) * P, 0.0f);
  for (int r = 0; r < b.batch; ++r) {
    for (int s = 0; s < lengths[r]; ++s) {
      b.input_ids[r * S + s] = int32_t(1 + rng.below(k++, vocab - 1));
      b.input_mask[r * S + s] = 1;
      b.segment_ids[r * S + s] = s >= lengths[r] / 2;
    }
    for (int p = 0; p < npred[r]; ++p) {
      b.masked_positions[r * P + p] = 1 + 2 * p;  // distinct, inside the row
      b.masked_ids[r * P + p] = int32_t(rng.below(k++, vocab));
      b.masked_weights[r * P + p] = 1.0f;
    }
    b.nsp_labels.push_back(int32_t(rng.below(k++, 2)));
  }
  return b;
}

data::BertBatch slice_rows(const data::BertBatch& b, int begin, int count) {
  data::BertBatch s = b;
  s.batch = count;
  auto cut = [&](auto& v, const auto& src, int width) {
    v.assign(src.begin() + begin * width, src.begin() + (begin + count) * width);
  };
  cut(s.input_ids, b.input_ids, b.seq_len);
  cut(s.segment_ids, b.segment_ids, b.seq_len);
  cut(s.input_mask, b.input_mask, b.seq_len);
  cut(s.masked_positions, b.masked_positions, b.max_pred);
  cut(s.masked_ids, b.masked_ids, b.max_pred);
  cut(s.masked_weights, b.masked_weights, b.max_pred);
  cut(s.nsp_labels, b.nsp_labels, 1);
  return s;
}

double testing_max_rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - want[i]));
    ref = std::max(ref, std::abs(double(want[i])));
  }
  return err / ref;
}

int64_t store_numel(const ParamStore& store) {
  int64_t n = 0;
  for (const auto& s : store.specs()) n += s.numel;
  return n;
}

TEST(Bert, ParamCountMatchesTheRegisteredParameters) {
  for (bool pre_ln : {false, true}) {
    for (bool binary_head : {true, false}) {
      BertConfig c = tiny_config();
      c.pre_ln = pre_ln;
      c.binary_head = binary_head;
      ParamStore store;
      BertForPretraining model(c, store);
      EXPECT_EQ(BertForPretraining::param_count(c), store_numel(store)) << pre_ln << binary_head;
      EXPECT_EQ(store.find("bert.encoder.LayerNorm.weight") != nullptr, pre_ln);
      EXPECT_EQ(store.find("bert.embeddings.LayerNorm.weight") != nullptr, !pre_ln);
      EXPECT_EQ(store.find("cls.seq_relationship.weight") != nullptr, binary_head);
    }
  }
  // Hugging Face bert-large-uncased BertForPreTraining: 335,141,888 (BertModel) + heads.
  EXPECT_EQ(BertForPretraining::param_count(BertConfig{}), 336226108);
}

TEST(Bert, FlopsPerSampleFollowsTheDocumentedFormula) {
  ParamStore store;
  BertConfig c = tiny_config();
  BertForPretraining tiny(c, store);
  // 6 * (16*2*(4*32^2 + 2*32*64) + 5*(32^2 + 32*64) + 32^2 + 64) + 12*2*16^2*32
  EXPECT_EQ(tiny.flops_per_sample(16, 5), 6 * (32 * (4096 + 4096) + 5 * (1024 + 2048) + 1088) +
                                              12 * 2 * 256 * 32);
  EXPECT_EQ(store.find("cls.predictions.bias")->decay, false);
}

TEST(Bert, InitMlperfHasTruncatedNormalWeightsAndUnitLayerNorm) {
  BertConfig c = tiny_config();
  c.vocab_size = 1000;
  c.intermediate = 256;
  ParamStore store;
  BertForPretraining model(c, store);
  model.init_mlperf(42);
  double sum = 0, sum2 = 0, max_abs = 0;
  int64_t n = 0, zeros = 0;
  for (const auto& s : store.specs()) {
    const float* w = store.host_values().data() + s.offset;
    const bool norm_weight = s.name.find("LayerNorm.weight") != std::string::npos;
    for (int64_t i = 0; i < s.numel; ++i) {
      if (!s.decay) {
        ASSERT_EQ(w[i], norm_weight ? 1.0f : 0.0f) << s.name;
        continue;
      }
      sum += w[i];
      sum2 += double(w[i]) * w[i];
      max_abs = std::max(max_abs, double(std::fabs(w[i])));
      zeros += w[i] == 0.0f;
      ++n;
    }
  }
  ASSERT_GT(n, 70000);
  const double mean = sum / n, std = std::sqrt(sum2 / n - mean * mean);
  // A standard normal truncated to [-2, 2] has std 0.8796.
  EXPECT_NEAR(mean, 0.0, 3 * 0.0176 / std::sqrt(double(n)) + 1e-6);
  EXPECT_NEAR(std, 0.02 * 0.8796, 0.02 * 0.8796 * 0.01);
  EXPECT_LE(max_abs, 0.04 + 1e-7);
  EXPECT_GT(max_abs, 0.039);
  EXPECT_LT(zeros, 3);
}

TEST(Bert, InitMlperfIsBitwiseReproducibleAndThreadIndependent) {
  const BertConfig c = tiny_config();
  auto init = [&](uint64_t seed, int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    ParamStore store;
    BertForPretraining model(c, store);
    model.init_mlperf(seed);
    omp_set_num_threads(saved);
    return store.values_vector();
  };
  const std::vector<float> a = init(7, 1), b = init(7, 3), other = init(8, 2);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(a.data(), other.data(), a.size() * sizeof(float)), 0);
}

// Each micro-batch's loss is normalised by its own MLM weight sum and NSP row count; when two
// halves have equal weight sums and row counts, half-batch gradients accumulated with
// loss_scale 1/2 equal the full-batch gradient (up to the 1e-5 in the MLM denominator).
TEST(Bert, HalfBatchesAccumulateToTheFullBatchGradient) {
  for (bool pre_ln : {false, true}) {
    BertConfig c = tiny_config();
    c.pre_ln = pre_ln;
    c.init_std = 0.2f;  // large enough weights for non-trivial activations
    ParamStore store;
    BertForPretraining model(c, store);
    model.init_mlperf(5);
    // Weight sums 3+1 = 4 and 2+2 = 4; two rows each.
    const data::BertBatch full = make_batch({16, 9, 12, 6}, {3, 1, 2, 2}, 16, 4, 64, 11);
    const Step step{1, 0, true};

    const BertOutputs f = model.forward(step, full);
    model.backward(step, 1.0f);
    const std::vector<float> g_full = store.grads_vector();

    store.zero_grad();
    const BertOutputs h1 = model.forward(step, slice_rows(full, 0, 2));
    model.backward(step, 0.5f);
    const BertOutputs h2 = model.forward(step, slice_rows(full, 2, 2));
    model.backward(step, 0.5f);
    EXPECT_NEAR(0.5 * (h1.loss + h2.loss), f.loss, 1e-5 * f.loss);
    EXPECT_EQ(h1.nsp_count + h2.nsp_count, f.nsp_count);

    for (const auto& s : store.specs()) {
      // Analytically zero (softmax ignores a per-row constant); bert_golden_test bounds it.
      if (s.name.find("attention.self.key.bias") != std::string::npos) continue;
      double d = 0, r = 0;
      for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
        d += std::pow(double(store.host_grads()[i]) - g_full[i], 2);
        r += double(g_full[i]) * g_full[i];
      }
      ASSERT_GT(r, 0.0) << s.name;
      EXPECT_LT(std::sqrt(d / r), 1e-4) << s.name << " pre_ln=" << pre_ln;
    }
  }
}

// Dropout masks are keyed by the global sample index (step.sample_offset + row), not by the
// step counter: the same samples get the same masks, other samples other masks.
TEST(Bert, DropoutMasksFollowTheGlobalSampleIndex) {
  BertConfig c = tiny_config();
  c.hidden_dropout = c.attention_dropout = 0.1f;
  ParamStore store;
  BertForPretraining model(c, store);
  model.init_mlperf(1);
  const data::BertBatch batch = make_batch({16, 10}, {3, 2}, 16, 4, 64, 3);
  auto step = [](uint64_t index, uint64_t offset, bool training) {
    Step s{9, index, training};
    s.sample_offset = offset;
    return s;
  };
  const double a = model.forward(step(4, 6, true), batch).loss;
  const double same_samples = model.forward(step(5, 6, true), batch).loss;
  const double other = model.forward(step(4, 8, true), batch).loss;
  const double eval1 = model.forward(step(4, 6, false), batch).loss;
  const double eval2 = model.forward(step(5, 8, false), batch).loss;
  EXPECT_EQ(a, same_samples);
  EXPECT_NE(a, other);
  EXPECT_EQ(eval1, eval2);
}

// Relative L2 error of every parameter's gradient against a reference gradient vector,
// except the key biases (analytically zero gradient; bert_golden_test bounds it).
void expect_grads_close(const ParamStore& store, const std::vector<float>& want, double tol,
                        const std::string& what) {
  for (const auto& s : store.specs()) {
    if (s.name.find("attention.self.key.bias") != std::string::npos) continue;
    double d = 0, r = 0;
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
      d += std::pow(double(store.host_grads()[i]) - want[i], 2);
      r += double(want[i]) * want[i];
    }
    ASSERT_GT(r, 0.0) << s.name;
    EXPECT_LT(std::sqrt(d / r), tol) << s.name << " " << what;
  }
}

// A 4-layer bert-tiny with dropout: the model the tests below run in two ways.
BertConfig four_layers_with_dropout() {
  BertConfig c = tiny_config();
  c.layers = 4;
  c.init_std = 0.2f;
  c.hidden_dropout = c.attention_dropout = 0.1f;
  return c;
}

// Training steps of `c`, each a (step index, batch seed): the summed loss, the gradients and the
// host bytes the model held with them; `check` sees the store after the last step.
struct StepsRun {
  double loss = 0;
  std::vector<float> grads;
  size_t bytes = 0;
};
StepsRun run_steps(const BertConfig& c, std::initializer_list<std::pair<uint64_t, uint64_t>> steps,
                   const std::function<void(const ParamStore&)>& check = {}) {
  StepsRun run;
  const size_t before = host_bytes_in_use();
  ParamStore store;
  BertForPretraining model(c, store);
  model.init_mlperf(5);
  for (const auto& [index, seed] : steps) {
    const data::BertBatch batch = make_batch(std::vector<int>(8, 30), std::vector<int>(8, 3), 32, 4, 64, seed);
    const Step step{3, index, true};
    run.loss += model.forward(step, batch).loss;
    model.backward(step, 1.0f);
  }
  run.grads = store.grads_vector();
  run.bytes = host_bytes_in_use() - before;
  if (check) check(store);
  return run;
}

// One global batch of 32 samples as 4 micro-batches of 8 (sample_offset 0, 8, 16, 24,
// loss_scale 1/4) or as one micro-batch of 32, with dropout ON: the masks depend only on the
// global sample index, so losses and gradients agree to rounding. Each group of 8 has the same
// MLM weight sum (20) and NSP row count (8), so the per-micro-batch normalisation matches.
TEST(Bert, DropoutMicroBatchesOf8Match1MicroBatchOf32) {
  for (bool pre_ln : {false, true}) {
    BertConfig c = tiny_config();
    c.pre_ln = pre_ln;
    c.init_std = 0.2f;
    c.hidden_dropout = c.attention_dropout = 0.1f;
    ParamStore store;
    BertForPretraining model(c, store);
    model.init_mlperf(5);
    std::vector<int> lengths, npred;
    for (int b = 0; b < 32; ++b) {
      lengths.push_back(9 + b % 8);
      npred.push_back(1 + b % 4);
    }
    const data::BertBatch full = make_batch(lengths, npred, 16, 4, 64, 17);
    const Step step{3, 40, true};

    const BertOutputs f = model.forward(step, full);
    model.backward(step, 1.0f);
    const std::vector<float> g_full = store.grads_vector();

    store.zero_grad();
    double loss = 0;
    for (int m = 0; m < 4; ++m) {
      Step s{3, uint64_t(160 + m), true};  // another step counter: it must not matter
      s.sample_offset = uint64_t(8 * m);
      loss += model.forward(s, slice_rows(full, 8 * m, 8)).loss / 4;
      model.backward(s, 0.25f);
    }
    EXPECT_NEAR(loss, f.loss, 1e-5 * f.loss) << "pre_ln=" << pre_ln;
    expect_grads_close(store, g_full, 1e-4, pre_ln ? "pre-LN" : "post-LN");
  }
}

// --recompute-activations (selective: the attention core) changes where the attention
// probabilities live, not what is computed: losses and gradients are bitwise those of the run
// that keeps them, with dropout on, in both layouts; and the model's tensors take less memory
// (one shared (B, heads, S, S) buffer instead of one per layer).
TEST(Bert, RecomputedAttentionGivesBitwiseTheSameGradientsInLessMemory) {
  for (bool pre_ln : {false, true}) {
    std::vector<float> grads[2];
    double loss[2];
    size_t bytes[2];
    for (bool recompute : {false, true}) {
      BertConfig c = four_layers_with_dropout();
      c.pre_ln = pre_ln;
      c.recompute_attention = recompute;
      StepsRun run = run_steps(c, {{7, 9}});
      loss[recompute] = run.loss, grads[recompute] = std::move(run.grads), bytes[recompute] = run.bytes;
    }
    const char* layout = pre_ln ? "pre-LN" : "post-LN";
    EXPECT_EQ(loss[1], loss[0]) << layout;
    ASSERT_EQ(grads[1].size(), grads[0].size());
    EXPECT_EQ(std::memcmp(grads[1].data(), grads[0].data(), grads[0].size() * sizeof(float)), 0) << layout;
    // Per layer, the core keeps the probabilities (f32: the scores' own buffer; the dropped
    // probabilities and every gradient are shared by the layers anyway): B*heads*S*S floats =
    // 32768 x 4 bytes; 3 of 4 layers' go.
    const size_t core = size_t(8 * 4 * 32 * 32) * 4;
    EXPECT_LE(bytes[1] + 3 * core - core / 8, bytes[0]) << layout << ": " << bytes[1] << " vs " << bytes[0];
  }
}

// The fused attention core (--attention-backend flash) keeps no (B, heads, S, S) tensor: the
// model takes at least the unfused core's probabilities (one f32 buffer per layer) less memory,
// and gives its loss and gradients up to f32 rounding, dropout on (the same masks).
TEST(Bert, FusedAttentionGivesTheUnfusedGradientsWithoutScoresInMemory) {
  std::vector<float> grads;
  double loss[2];
  size_t bytes[2];
  for (nn::AttentionCore core : {nn::AttentionCore::unfused, nn::AttentionCore::fused}) {
    const bool fused = core == nn::AttentionCore::fused;
    BertConfig c = four_layers_with_dropout();
    c.hidden = 64, c.intermediate = 128;  // head dim 16
    c.attention_core = core;
    StepsRun run = run_steps(c, {{7, 9}}, [&](const ParamStore& store) {
      if (fused) expect_grads_close(store, grads, 1e-4, "fused");
    });
    loss[fused] = run.loss, bytes[fused] = run.bytes;
    if (!fused) grads = std::move(run.grads);
  }
  EXPECT_NEAR(loss[1], loss[0], 1e-5 * loss[0]);
  const size_t core = size_t(8 * 4 * 32 * 32) * 4;  // B*heads*S*S f32
  EXPECT_LE(bytes[1] + 4 * core, bytes[0]) << bytes[1] << " vs " << bytes[0];
}

// Full recomputation (--recompute-granularity full) recomputes whole layers in backward from the
// saved input of their group: over two steps with dropout, post- and pre-LN, uniform groups of 1
// and of 3 (the last group shorter) and block 2 give bitwise the losses and gradients of the model
// that keeps every layer; with groups of 1 three of the four layers keep only their input, at
// least their attention probabilities (B*heads*S*S f32) smaller each.
TEST(Bert, FullRecomputationGivesBitwiseTheSameGradientsInLessMemory) {
  using Recompute = BertConfig::Recompute;
  const std::pair<Recompute, int64_t> settings[] = {
      {Recompute::none, 1}, {Recompute::uniform, 1}, {Recompute::uniform, 3}, {Recompute::block, 2}};
  for (bool pre_ln : {false, true}) {
    std::vector<float> grads[4];
    double loss[4];
    size_t bytes[4];
    for (int i = 0; i < 4; ++i) {
      BertConfig c = four_layers_with_dropout();
      c.pre_ln = pre_ln;
      std::tie(c.recompute, c.recompute_layers) = settings[i];
      StepsRun run = run_steps(c, {{7, 7}, {8, 8}});
      loss[i] = run.loss, grads[i] = std::move(run.grads), bytes[i] = run.bytes;
    }
    for (int i = 1; i < 4; ++i) {
      const std::string setting = fmt::format("{} setting {}", pre_ln ? "pre-LN" : "post-LN", i);
      EXPECT_EQ(loss[i], loss[0]) << setting;
      ASSERT_EQ(grads[i].size(), grads[0].size());
      EXPECT_EQ(std::memcmp(grads[i].data(), grads[0].data(), grads[0].size() * sizeof(float)), 0) << setting;
    }
    const size_t core = size_t(8 * 4 * 32 * 32) * 4;
    EXPECT_LE(bytes[1] + 3 * core, bytes[0]) << bytes[1] << " vs " << bytes[0];
  }
}

// The gradients lend their memory to the layers' saved activations (nn/grad_loan.h): two steps of
// a 4-layer bert-tiny with dropout, in f32 and bf16, post- and pre-LN, give bitwise the losses and
// gradients of the model that does not lend, and the model's tensors take less memory by what was
// lent: at least two of the three lower layers' gradients. A training forward whose gradients hold
// contributions (no clear_grads() before it) is refused.
TEST(Bert, GradientsLendTheirMemoryToActivationsWithoutChangingSteps) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (bool pre_ln : {false, true}) {
      const std::string what = std::string(dtype_name(dtype)) + (pre_ln ? " pre-LN" : " post-LN");
      std::vector<float> grads[2];
      double loss[2][2];
      size_t bytes[2], lent = 0, layer_grad_bytes = 0;
      for (bool lend : {false, true}) {
        BertConfig c = tiny_config();
        c.pre_ln = pre_ln;
        c.layers = 4;
        c.init_std = 0.2f;
        c.hidden_dropout = c.attention_dropout = 0.1f;
        const size_t before = host_bytes_in_use();
        ParamStore store;
        BertForPretraining model(c, store);
        model.init_mlperf(5);
        store.set_compute_dtype(dtype);
        if (lend) model.lend_gradients();
        const data::BertBatch batch = make_batch(std::vector<int>(8, 30), std::vector<int>(8, 3), 32, 4, 64, 9);
        for (uint64_t s = 0; s < 2; ++s) {
          Step step{3, s, true};
          step.compute_dtype = dtype;
          store.clear_grads();
          loss[lend][s] = model.forward(step, batch).loss;
          model.backward(step, 1.0f);
          store.settle_grads();
        }
        grads[lend] = store.grads_vector();
        bytes[lend] = host_bytes_in_use() - before;
        if (!lend) continue;
        lent = model.bytes_lent();
        const ParamSpec& first = *store.find("bert.encoder.layer.0.attention.self.query.weight");
        const ParamSpec& next = *store.find("bert.encoder.layer.1.attention.self.query.weight");
        layer_grad_bytes = size_t(next.offset - first.offset) * sizeof(float);
        Step step{3, 2, true};
        step.compute_dtype = dtype;
        EXPECT_THROW(model.forward(step, batch), Error) << what << ": gradients hold the last step's";
      }
      EXPECT_EQ(loss[1][0], loss[0][0]) << what;
      EXPECT_EQ(loss[1][1], loss[0][1]) << what;
      ASSERT_EQ(grads[1].size(), grads[0].size());
      EXPECT_EQ(std::memcmp(grads[1].data(), grads[0].data(), grads[0].size() * sizeof(float)), 0) << what;
      EXPECT_GE(lent, 2 * layer_grad_bytes) << what;
      EXPECT_LE(lent, 3 * layer_grad_bytes) << what;
      EXPECT_EQ(bytes[1] + lent, bytes[0]) << what;
    }
}

// bf16 and f16 compute (activations and weight copies; f32 statistics, logits, gradients)
// stay within stated tolerances of the f32 forward / backward of bert-tiny:
//   MLM logits: max error / max |logit|, loss: relative, gradients: relative L2 per parameter.
TEST(Bert, Bf16AndF16ComputeStayWithinTolerancesOfF32) {
  struct Tol {
    DType dtype;
    double logits, loss, grads;
  };
  for (const Tol tol : {Tol{DType::bf16, 3e-2, 1e-2, 1e-1}, Tol{DType::f16, 4e-3, 2e-3, 2e-2}})
    for (bool pre_ln : {false, true}) {
      BertConfig c = tiny_config();
      c.pre_ln = pre_ln;
      c.init_std = 0.2f;
      c.hidden_dropout = c.attention_dropout = 0.1f;
      ParamStore store;
      BertForPretraining model(c, store);
      model.init_mlperf(5);
      const data::BertBatch batch = make_batch({16, 9, 12, 6}, {3, 1, 2, 2}, 16, 4, 64, 11);
      const Step f32_step{1, 0, true};
      const BertOutputs want = model.forward(f32_step, batch);
      const std::vector<float> logits = to_float_vector(model.mlm_logits());
      model.backward(f32_step, 1.0f);
      const std::vector<float> grads = store.grads_vector();

      store.set_compute_dtype(tol.dtype);
      store.zero_grad();
      Step step = f32_step;
      step.compute_dtype = tol.dtype;
      const BertOutputs got = model.forward(step, batch);
      ASSERT_EQ(model.mlm_logits().dtype, DType::f32);
      const std::string what = std::string(dtype_name(tol.dtype)) + (pre_ln ? " pre-LN" : " post-LN");
      EXPECT_LT(testing_max_rel_error(to_float_vector(model.mlm_logits()), logits), tol.logits) << what;
      EXPECT_NEAR(got.loss, want.loss, tol.loss * want.loss) << what;
      model.backward(step, 1.0f);
      expect_grads_close(store, grads, tol.grads, what);
      // Not the f32 computation in disguise.
      EXPECT_NE(got.loss, want.loss) << what;
    }
}

TEST(Bert, RejectsInconsistentBatches) {
  ParamStore store;
  BertForPretraining model(tiny_config(), store);
  EXPECT_THROW(model.backward(Step{}, 1.0f), Error);
  const data::BertBatch good = make_batch({16, 10}, {3, 2}, 16, 4, 64, 3);
  EXPECT_NO_THROW(model.forward(Step{}, good));

  data::BertBatch b = good;
  b.masked_positions[1] = 16;
  EXPECT_THROW(model.forward(Step{}, b), Error);
  b = good;
  b.input_ids.pop_back();
  EXPECT_THROW(model.forward(Step{}, b), Error);
  b = good;
  b.input_ids[3] = 64;  // outside the vocabulary
  EXPECT_THROW(model.forward(Step{}, b), Error);
  b = good;
  b.segment_ids[3] = 2;
  EXPECT_THROW(model.forward(Step{}, b), Error);
  b = make_batch({33}, {1}, 33, 1, 64, 3);  // longer than max_position
  EXPECT_THROW(model.forward(Step{}, b), Error);
}

}  // namespace
}  // namespace kiln::models
