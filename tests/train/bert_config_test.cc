#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kiln/core/error.h"
#include "kiln/train/bert_config.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"

namespace kiln::train {
namespace {

struct Resolved {
  BertTrainConfig config;
  ConfigRegistry registry;
};

// Resolves a config as `kiln train bert` does: TOML < env < flags.
void resolve(Resolved& r, const std::string& toml, std::vector<std::string> args) {
  register_bert_config(r.registry, r.config);
  if (!toml.empty()) {
    const auto path = testing::unique_temp_path("config_test.toml");
    std::ofstream(path) << toml;
    r.registry.apply_toml(path);
  }
  r.registry.apply_env();
  testing::apply_flag_list(r.registry, std::move(args));
  finalize_bert_config(r.config, r.registry);
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(BertConfig, DerivesTinygradDefaultsFromGlobalBatch) {
  Resolved r;
  resolve(r, "[train]\nglobal_batch_size = 96\n", {"--fake-data", "--seq-length", "128"});
  EXPECT_NEAR(r.config.lr, 0.000175, 1e-12);
  EXPECT_EQ(r.config.train_steps, 37500);
  EXPECT_EQ(r.config.eval_interval, 1563);  // ceil(150,000 / 96)
  EXPECT_EQ(r.config.eval_iters, 105);      // ceil(10,000 / 96)
  EXPECT_EQ(r.config.accumulation_steps(), 1);
}

TEST(BertConfig, FlagsBeatEnvironmentBeatPreset) {
  ScopedEnv bs("BS", "64");
  ScopedEnv lr("OPT_BASE_LEARNING_RATE", "0.002");
  Resolved r;
  resolve(r, "[train]\nglobal_batch_size = 32\n[optim]\nlr = 0.001\nweight_decay = 0.5\n",
          {"--fake-data", "--seq-length", "64", "--lr", "0.003", "--micro-batch-size", "16"});
  EXPECT_EQ(r.config.global_batch_size, 64);  // env over preset
  EXPECT_DOUBLE_EQ(r.config.lr, 0.003);       // flag over env
  EXPECT_DOUBLE_EQ(r.config.weight_decay, 0.5);
  EXPECT_EQ(r.config.accumulation_steps(), 4);
}

TEST(BertConfig, TheSettingsTakenFromTheEnvironmentAreNamed) {
  ScopedEnv decay("DECAY", "2000");
  Resolved r;
  resolve(r, "", {"--fake-data", "--seq-length", "64"});
  EXPECT_DOUBLE_EQ(r.config.weight_decay, 2000.0);
  EXPECT_EQ(r.registry.from_environment(), std::vector<std::string>{"DECAY=2000 (optim.weight_decay)"});
  Resolved none;
  unsetenv("DECAY");
  resolve(none, "", {"--fake-data", "--seq-length", "64"});
  EXPECT_TRUE(none.registry.from_environment().empty());
}

TEST(BertConfig, UnknownPresetKeyIsAnErrorNamingIt) {
  Resolved r;
  try {
    resolve(r, "[model]\nhiden_size = 12\n", {"--fake-data"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.hiden_size"), std::string::npos) << e.what();
  }
}

TEST(BertConfig, NonNumericEnvironmentValueIsAnErrorNamingTheVariable) {
  ScopedEnv bs("TRAIN_STEPS", "many");
  Resolved r;
  try {
    resolve(r, "", {"--fake-data", "--seq-length", "64"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TRAIN_STEPS"), std::string::npos) << e.what();
  }
}

TEST(BertConfig, InitCheckpointComesFromTinygradsEnvironmentNameOrTheFlag) {
  ScopedEnv dir("INIT_CKPT_DIR", "/raid/datasets/wiki/ckpt");
  Resolved env;
  resolve(env, "", {"--fake-data", "--seq-length", "64"});
  EXPECT_EQ(env.config.init_checkpoint, "/raid/datasets/wiki/ckpt");
  Resolved flag;
  resolve(flag, "", {"--fake-data", "--seq-length", "64", "--init-checkpoint", "/ckpt/model.ckpt-28252"});
  EXPECT_EQ(flag.config.init_checkpoint, "/ckpt/model.ckpt-28252");
  Resolved pre_ln;
  EXPECT_NE(testing::error_of([&] { resolve(pre_ln, "", {"--fake-data", "--seq-length", "64", "--pre-ln"}); })
                .find("a model.pre_ln model cannot start from it"),
            std::string::npos);
}

TEST(BertConfig, InconsistentValuesAreRejected) {
  Resolved a;
  EXPECT_THROW(resolve(a, "", {"--fake-data", "--hidden-size", "100", "--num-attention-heads", "3"}),
               Error);
  Resolved b;
  EXPECT_THROW(resolve(b, "", {"--fake-data", "--global-batch-size", "10", "--micro-batch-size", "3"}),
               Error);
  Resolved c;
  EXPECT_THROW(resolve(c, "", {}), Error);  // no data and no fake data
}

TEST(BertConfig, GradientBucketsComeFromMegatronsFlagsOrToml) {
  Resolved a;
  resolve(a, "[parallel]\nddp_bucket_size = 5000\n", {"--fake-data", "--overlap-grad-reduce"});
  EXPECT_TRUE(a.config.ddp.overlap_grad_reduce);
  EXPECT_EQ(a.config.ddp.bucket_size, 5000);
  Resolved b;
  EXPECT_NE(testing::error_of([&] { resolve(b, "", {"--fake-data", "--ddp-bucket-size", "-1"}); })
                .find("parallel.ddp_bucket_size must be >= 0, got -1"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::train

namespace kiln::train {
namespace {

TEST(PrecisionConfig, DefaultIsF32WithoutLossScaling) {
  Resolved r;
  resolve(r, "", {"--fake-data", "--seq-length", "64"});
  EXPECT_EQ(r.config.precision.dtype, DType::f32);
  EXPECT_EQ(r.config.precision.scaler.kind, optim::LossScalerConfig::Kind::none);
  EXPECT_EQ(r.config.precision.max_skipped_steps, 10);
}

TEST(PrecisionConfig, Bf16FlagAndDeprecatedMatmulDtypeMeanBf16Compute) {
  Resolved a;
  resolve(a, "", {"--fake-data", "--seq-length", "64", "--bf16"});
  EXPECT_EQ(a.config.precision.dtype, DType::bf16);
  EXPECT_EQ(a.config.precision.scaler.kind, optim::LossScalerConfig::Kind::none);
  EXPECT_EQ(a.config.precision.precision, "bf16");
  Resolved b;
  resolve(b, "", {"--fake-data", "--seq-length", "64", "--matmul-dtype", "bf16"});
  EXPECT_EQ(b.config.precision.dtype, DType::bf16);
}

TEST(PrecisionConfig, MegatronFp16GetsTheDynamicScalerWithItsDefaults) {
  Resolved r;
  resolve(r, "", {"--fake-data", "--seq-length", "64", "--fp16"});
  const optim::LossScalerConfig& s = r.config.precision.scaler;
  EXPECT_EQ(r.config.precision.dtype, DType::f16);
  EXPECT_EQ(s.kind, optim::LossScalerConfig::Kind::dynamic);
  EXPECT_EQ(s.scale, 4294967296.0);
  EXPECT_EQ(s.min_scale, 1.0);
  EXPECT_EQ(s.window, 1000);
  EXPECT_EQ(s.hysteresis, 2);
  Resolved custom;
  resolve(custom, "", {"--fake-data", "--seq-length", "64", "--fp16", "--initial-loss-scale", "65536",
                       "--min-loss-scale", "4", "--loss-scale-window", "50", "--hysteresis", "1"});
  EXPECT_EQ(custom.config.precision.scaler.scale, 65536.0);
  EXPECT_EQ(custom.config.precision.scaler.min_scale, 4.0);
  EXPECT_EQ(custom.config.precision.scaler.window, 50);
  EXPECT_EQ(custom.config.precision.scaler.hysteresis, 1);
  Resolved fixed;
  resolve(fixed, "", {"--fake-data", "--seq-length", "64", "--fp16", "--loss-scale", "128"});
  EXPECT_EQ(fixed.config.precision.scaler.kind, optim::LossScalerConfig::Kind::constant);
  EXPECT_EQ(fixed.config.precision.scaler.scale, 128.0);
}

TEST(PrecisionConfig, TinygradHalfGetsTheStaticLossScaler) {
  ScopedEnv half("DEFAULT_FLOAT", "HALF");
  Resolved r;
  resolve(r, "", {"--fake-data", "--seq-length", "64"});
  EXPECT_EQ(r.config.precision.dtype, DType::f16);
  EXPECT_EQ(r.config.precision.scaler.kind, optim::LossScalerConfig::Kind::constant);
  EXPECT_EQ(r.config.precision.scaler.scale, 2048.0);
  ScopedEnv scaler("LOSS_SCALER", "512");
  Resolved s;
  resolve(s, "", {"--fake-data", "--seq-length", "64"});
  EXPECT_EQ(s.config.precision.scaler.scale, 512.0);
}

TEST(PrecisionConfig, TinygradNamesAndConflictsAreCheckedNamingTheKey) {
  {
    ScopedEnv bf16("DEFAULT_FLOAT", "BFLOAT16");
    Resolved r;
    resolve(r, "", {"--fake-data", "--seq-length", "64"});
    EXPECT_EQ(r.config.precision.dtype, DType::bf16);
  }
  {
    ScopedEnv bad("DEFAULT_FLOAT", "INT8");
    Resolved r;
    try {
      resolve(r, "", {"--fake-data", "--seq-length", "64"});
      FAIL() << "INT8 accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("DEFAULT_FLOAT"), std::string::npos) << e.what();
    }
  }
  Resolved both;
  EXPECT_THROW(resolve(both, "", {"--fake-data", "--seq-length", "64", "--bf16", "--fp16"}), Error);
  Resolved negative;
  EXPECT_THROW(resolve(negative, "", {"--fake-data", "--seq-length", "64", "--max-skipped-steps", "-1"}), Error);
}

}  // namespace
}  // namespace kiln::train
