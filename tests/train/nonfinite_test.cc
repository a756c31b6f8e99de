// Non-finite values in the training loop: a NaN injected into one gradient (KILN_TEST_NAN_STEP)
// skips exactly that step — weights, optimizer state and LR schedule as if the step never ran —
// and consecutive skips stop the run with an error naming the step, the last checkpoint intact.
// Also: the start line and --dry-run report the precision that runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/io/safetensors.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/recipes/bert.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;

using testing::ScopedEnv;

// BERT-tiny on generated batches (no data preparation), 4 sequences of 32 tokens per step.
BertTrainConfig fake_tiny(const fs::path& run, std::vector<std::string> extra) {
  BertTrainConfig c;
  ConfigRegistry registry;
  register_bert_config(registry, c);
  registry.apply_toml(fs::path(KILN_SOURCE_DIR) / "configs/bert-tiny.toml");
  testing::apply_flag_list(registry, testing::concat({"--fake-data", "--seq-length", "32", "--max-predictions", "5",
                                                      "--global-batch-size", "4", "--eval-interval", "1000",
                                                      "--eval-iters", "1", "--lr", "0.01", "--lr-warmup-iters",
                                                      "0", "--output-dir", run.string()},
                                                     extra));
  finalize_bert_config(c, registry);
  return c;
}

fs::path fresh(const std::string& name) {
  return testing::unique_temp_dir("nonfinite_" + name);
}

TEST(NonFiniteSteps, NanGradientSkipsExactlyThatStep) {
  const fs::path dir = fresh("skip");
  std::ostringstream console;
  const BertRunResult clean = train_bert(fake_tiny(dir / "clean", {"--train-iters", "5"}), {}, console);
  BertRunResult hit;
  {
    ScopedEnv nan("KILN_TEST_NAN_STEP", "3");
    hit = train_bert(fake_tiny(dir / "hit", {"--train-iters", "5"}), {}, console);
  }
  ASSERT_EQ(hit.losses.size(), 5u);
  EXPECT_EQ(hit.skipped_steps, 1);
  EXPECT_EQ(clean.skipped_steps, 0);
  EXPECT_EQ(hit.steps, 5);
  // Steps 1-3 ran forward from the same weights; step 3's update was dropped, so step 4 differs.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(hit.losses[size_t(i)], clean.losses[size_t(i)]) << "step " << i + 1;
  EXPECT_NE(hit.losses[3], clean.losses[3]);
  for (double l : hit.losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_NE(console.str().find("warning: step 3: skipped, the gradient norm is not finite"), std::string::npos)
      << console.str();
}

TEST(NonFiniteSteps, SkippedStepLeavesWeightsOptimizerAndScheduleUntouched) {
  const fs::path dir = fresh("state");
  std::ostringstream console;
  // A: steps 1-2 update, step 3 is skipped (checkpoint after step 3). B: stops after step 2.
  {
    ScopedEnv nan("KILN_TEST_NAN_STEP", "3");
    const BertRunResult a = train_bert(
        fake_tiny(dir / "a", {"--train-iters", "3", "--save", (dir / "a_ckpt").string()}), {}, console);
    ASSERT_EQ(a.skipped_steps, 1);
  }
  const BertRunResult b = train_bert(
      fake_tiny(dir / "b", {"--train-iters", "3", "--exit-interval", "2", "--save", (dir / "b_ckpt").string()}), {},
      console);
  ASSERT_EQ(b.steps, 2);
  const fs::path a_ckpt = dir / "a_ckpt" / "iter_0000003", b_ckpt = dir / "b_ckpt" / "iter_0000002";
  ASSERT_TRUE(fs::exists(a_ckpt)) << console.str();
  EXPECT_EQ(read_file(a_ckpt / "model.safetensors"), read_file(b_ckpt / "model.safetensors"));
  EXPECT_EQ(read_file(a_ckpt / "optimizer.safetensors"), read_file(b_ckpt / "optimizer.safetensors"));
  const auto a_meta = nlohmann::json::parse(read_file(a_ckpt / "meta.json"));
  EXPECT_EQ(a_meta.at("optimizer_steps").get<int64_t>(), 2);  // the LR schedule's step
  EXPECT_EQ(a_meta.at("step").get<int64_t>(), 3);             // the iteration still advanced
  const io::SafetensorsFile weights = io::SafetensorsFile::open(a_ckpt / "model.safetensors");
  for (const auto& name : weights.names()) {
    const std::vector<float> v = to_float_vector(weights.get(name));
    for (float x : v) ASSERT_TRUE(std::isfinite(x)) << name;
  }
}

TEST(NonFiniteSteps, ConsecutiveSkipsStopTheRunNamingTheStep) {
  const fs::path dir = fresh("stop");
  std::ostringstream console;
  ScopedEnv nan("KILN_TEST_NAN_STEP", "3+");  // every step from 3 on
  try {
    train_bert(fake_tiny(dir / "run", {"--train-iters", "20", "--max-skipped-steps", "4", "--save-interval", "1",
                                       "--save", (dir / "ckpt").string()}),
               {}, console);
    FAIL() << "the run did not stop\n" << console.str();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("step 6: 4 consecutive steps skipped"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // Nothing was written for the failing step; the checkpoints of the skipped steps 3-5 (saved as
  // Megatron does) hold the weights of the last good step, 2.
  EXPECT_EQ(read_file(dir / "ckpt" / "latest_checkpointed_iteration.txt").substr(0, 1), "5");
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "iter_0000006"));
  EXPECT_EQ(read_file(dir / "ckpt" / "iter_0000005" / "model.safetensors"),
            read_file(dir / "ckpt" / "iter_0000002" / "model.safetensors"));
  EXPECT_NE(read_file(dir / "ckpt" / "iter_0000002" / "model.safetensors"),
            read_file(dir / "ckpt" / "iter_0000001" / "model.safetensors"));
}

// A loss scale forced far too high overflows the scaled gradients (in f32 as in f16): those
// steps are skipped, each skip halves the scale (hysteresis 1), and no weight becomes NaN.
TEST(NonFiniteSteps, LossScaleForcedTooHighIsLoweredBySkippedSteps) {
  const fs::path dir = fresh("scale");
  std::ostringstream console;
  const double initial = 1e39;  // beyond float: the scaled loss gradient overflows at once
  const BertRunResult r = train_bert(
      fake_tiny(dir / "run", {"--train-iters", "10", "--fp16", "--initial-loss-scale", "1e39", "--hysteresis", "1",
                              "--save", (dir / "ckpt").string(), "--save-interval", "100"}),
      {}, console);
  EXPECT_EQ(r.steps, 10);
  EXPECT_GE(r.skipped_steps, 1) << console.str();
  EXPECT_EQ(r.loss_scale, initial / std::ldexp(1.0, int(r.skipped_steps))) << console.str();
  EXPECT_NE(console.str().find("loss scale now"), std::string::npos) << console.str();
  const io::SafetensorsFile weights = io::SafetensorsFile::open(dir / "ckpt" / "iter_0000010" / "model.safetensors");
  for (const auto& name : weights.names())
    for (float x : to_float_vector(weights.get(name))) ASSERT_TRUE(std::isfinite(x)) << name;
  const auto meta = nlohmann::json::parse(read_file(dir / "ckpt" / "iter_0000010" / "meta.json"));
  EXPECT_EQ(meta.at("optimizer_steps").get<int64_t>(), 10 - r.skipped_steps);
  EXPECT_EQ(meta.at("loss_scaler").at("scale").get<double>(), r.loss_scale);
}

TEST(NonFiniteSteps, StartLineAndDryRunReportThePrecision) {
  const fs::path dir = fresh("precision");
  std::ostringstream run;
  train_bert(fake_tiny(dir / "run", {"--train-iters", "1"}), {}, run);
  EXPECT_NE(run.str().find("precision: f32"), std::string::npos) << run.str();
  std::ostringstream dry;
  train_bert(fake_tiny(dir / "dry", {"--dry-run", "--bf16"}), {}, dry);
  EXPECT_NE(dry.str().find("precision: bf16 storage"), std::string::npos) << dry.str();
  // bf16 on the CPU splits the master weights into the bf16 copy and their low halves; f16 keeps both.
  EXPECT_NE(dry.str().find("16 bytes/param: fp32 master as bf16 copy + low halves"), std::string::npos) << dry.str();
  std::ostringstream fp16;
  train_bert(fake_tiny(dir / "fp16", {"--dry-run", "--fp16"}), {}, fp16);
  EXPECT_NE(fp16.str().find("loss scaling dynamic (initial 4294967296"), std::string::npos) << fp16.str();
  EXPECT_NE(fp16.str().find("18 bytes/param"), std::string::npos) << fp16.str();
}

}  // namespace
}  // namespace kiln::train
