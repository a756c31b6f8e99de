#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kiln/core/error.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/recipes/bert.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/error_of.h"
#include "tests/testing/scoped_env.h"
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

using testing::ScopedEnv;

// tinygrad (examples/mlperf/model_train.py, train_bert): OPT_BASE_LEARNING_RATE = 0.000175 x
// sqrt(BS / 96), TRAIN_STEPS = 3,600,000 // BS, EVAL_STEP_FREQ = int(floor(0.05 x (230.23 x BS +
// 3e6) / 25000) x 25000 / BS) (rounded down), MAX_EVAL_STEPS = ceil(10000 / EVAL_BS).
TEST(BertConfig, DerivesTinygradDefaultsFromGlobalBatch) {
  Resolved r;
  resolve(r, "[train]\nglobal_batch_size = 96\n[eval]\nbatch_size = 96\n", {"--fake-data", "--seq-length", "128"});
  EXPECT_NEAR(r.config.lr, 0.000175, 1e-12);
  EXPECT_EQ(r.config.train_steps, 37500);
  EXPECT_EQ(r.config.eval_interval, 1562);  // int(150,000 / 96) = int(1562.5)
  EXPECT_EQ(r.config.eval_iters, 105);      // ceil(10,000 / 96)
  EXPECT_EQ(r.config.accumulation_steps(), 1);
  Resolved big;
  resolve(big, "[train]\nglobal_batch_size = 1024\n[eval]\nbatch_size = 1024\n", {"--fake-data", "--seq-length", "128"});
  EXPECT_EQ(big.config.eval_interval, 146);  // int(150,000 / 1024) = int(146.48)
  EXPECT_EQ(big.config.eval_iters, 10);
  EXPECT_EQ(big.config.train_steps, 3515);   // 3,600,000 // 1024
  EXPECT_NEAR(big.config.lr, 0.000175 * std::sqrt(1024.0 / 96.0), 1e-12);
  Resolved odd;
  resolve(odd, "[train]\nglobal_batch_size = 90\n", {"--fake-data", "--seq-length", "128"});
  EXPECT_EQ(odd.config.eval_interval, 1666);  // int(150,000 / 90) = int(1666.67)
}

// tinygrad: BS = 11 x GPUS when DEFAULT_FLOAT is HALF (or bf16), else 8 x GPUS; EVAL_BS = 1 x GPUS.
TEST(BertConfig, BatchDefaultsFollowTinygradsFormulaInThePrecisionAndDevices) {
  Resolved f32;
  resolve(f32, "", {"--fake-data", "--seq-length", "64"});
  EXPECT_EQ(f32.config.devices, 1);
  EXPECT_EQ(f32.config.global_batch_size, 8);
  EXPECT_EQ(f32.config.micro_batch_size, 8);
  EXPECT_EQ(f32.config.eval_batch_size, 1);
  EXPECT_EQ(f32.config.eval_iters, 10000);  // ceil(10,000 / 1)
  EXPECT_EQ(f32.config.train_steps, 450000);
  {
    ScopedEnv half("DEFAULT_FLOAT", "HALF");
    Resolved r;
    resolve(r, "", {"--fake-data", "--seq-length", "64"});
    EXPECT_EQ(r.config.global_batch_size, 11);
  }
  Resolved bf16;
  resolve(bf16, "", {"--fake-data", "--seq-length", "64", "--bf16"});
  EXPECT_EQ(bf16.config.global_batch_size, 11);
  // A dry run plans for GPUS devices without their processes: 8 x 8, each rank a micro-batch of 8.
  ScopedEnv gpus("GPUS", "8");
  Resolved eight;
  resolve(eight, "", {"--fake-data", "--seq-length", "64", "--dry-run"});
  EXPECT_EQ(eight.config.devices, 8);
  EXPECT_EQ(eight.config.global_batch_size, 64);
  EXPECT_EQ(eight.config.micro_batch_size, 8);
  EXPECT_EQ(eight.config.eval_batch_size, 8);
  EXPECT_EQ(eight.config.accumulation_steps(), 1);
  Resolved half8;
  resolve(half8, "", {"--fake-data", "--seq-length", "64", "--dry-run", "--fp16"});
  EXPECT_EQ(half8.config.global_batch_size, 88);
  // Under tensor x pipeline parallelism GPUS counts the data-parallel groups.
  Resolved tp;
  resolve(tp, "", {"--fake-data", "--seq-length", "64", "--dry-run", "--tensor-model-parallel-size", "2",
                   "--pipeline-model-parallel-size", "2"});
  EXPECT_EQ(tp.config.data_parallel(), 2);
  EXPECT_EQ(tp.config.global_batch_size, 16);
  Resolved uneven;
  EXPECT_NE(testing::error_of([&] {
              resolve(uneven, "", {"--fake-data", "--seq-length", "64", "--dry-run", "--tensor-model-parallel-size", "4",
                                   "--pipeline-model-parallel-size", "4"});
            }).find("8 devices do not split into --tensor-model-parallel-size 4 x --pipeline-model-parallel-size 4: "
                    "start a multiple of 16"),
            std::string::npos);
}

TEST(BertConfig, ATrainingRunMustBeStartedAsTheDevicesItNames) {
  Resolved r;
  EXPECT_EQ(testing::error_of([&] { resolve(r, "", {"--fake-data", "--seq-length", "64", "--devices", "4"}); }),
            "4 devices (GPUS, --devices or parallel.devices): kiln runs one process per device; start 4 with mpirun -np 4 (this is 1 process)");
  Resolved one;
  resolve(one, "", {"--fake-data", "--seq-length", "64", "--devices", "1"});
  EXPECT_EQ(one.config.devices, 1);
}

TEST(BertConfig, GradientAccumulationCountsTheMicroBatchesOfOneRank) {
  ScopedEnv gpus("GPUS", "4");
  Resolved r;
  resolve(r, "", {"--fake-data", "--seq-length", "64", "--dry-run", "--global-batch-size", "64",
                  "--micro-batch-size", "4"});
  EXPECT_EQ(r.config.accumulation_steps(), 4);  // 64 = 4 per micro-batch x 4 micro-batches x 4 ranks
  Resolved bad;
  EXPECT_NE(testing::error_of([&] {
              resolve(bad, "", {"--fake-data", "--seq-length", "64", "--dry-run", "--global-batch-size", "24",
                                "--micro-batch-size", "4"});
            }).find("train.global_batch_size (24) is not a multiple of train.micro_batch_size (4) x 4 data-parallel devices"),
            std::string::npos);
  Resolved uneven;
  EXPECT_NE(testing::error_of([&] {
              resolve(uneven, "", {"--fake-data", "--seq-length", "64", "--dry-run", "--global-batch-size", "6"});
            }).find("train.global_batch_size (6) does not split over 4 data-parallel devices"),
            std::string::npos);
}

// tinygrad's v5.0 8x MI300X run_and_time.sh: BS=EVAL_BS=1024 OPT_BASE_LEARNING_RATE=0.0011
// OPT_LAMB_BETA_1=0.60466 OPT_LAMB_BETA_2=0.85437 DECAY=0.1 TRAIN_STEPS=3900 DEFAULT_FLOAT=HALF, GPUS=8.
TEST(BertConfig, TheEightMi300xPresetIsTinygradsSubmission) {
  const BertTrainConfig c = testing::config_from_preset<BertTrainConfig>(
      register_bert_config, finalize_bert_config, KILN_SOURCE_DIR "/configs/bert-large-8xmi300x.toml", {"--dry-run"});
  EXPECT_EQ(c.devices, 8);
  EXPECT_EQ(c.global_batch_size, 1024);
  EXPECT_EQ(c.micro_batch_size, 128);
  EXPECT_EQ(c.eval_batch_size, 1024);
  EXPECT_EQ(c.train_steps, 3900);
  EXPECT_DOUBLE_EQ(c.lr, 0.0011);
  EXPECT_DOUBLE_EQ(c.beta1, 0.60466);
  EXPECT_DOUBLE_EQ(c.beta2, 0.85437);
  EXPECT_DOUBLE_EQ(c.weight_decay, 0.1);
  EXPECT_EQ(c.precision.dtype, DType::f16);
  EXPECT_EQ(c.precision.scaler.scale, 2048.0);
  EXPECT_EQ(c.warmup_steps, 1);
  EXPECT_EQ(c.eval_interval, 146);
  EXPECT_EQ(c.eval_iters, 10);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.hidden_size, 1024);
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

// Megatron's --attention-backend: local and unfused are the unfused core, fused and flash fused
// attention, auto picks per device (nn/attention_core.h); anything else is refused.
TEST(BertConfig, AttentionBackendsAreMegatronsNames) {
  const std::pair<const char*, nn::AttentionCore> backends[] = {
      {"auto", nn::AttentionCore::automatic}, {"local", nn::AttentionCore::unfused},
      {"unfused", nn::AttentionCore::unfused}, {"fused", nn::AttentionCore::fused}, {"flash", nn::AttentionCore::fused}};
  for (const auto& [name, core] : backends) {
    Resolved r;
    resolve(r, "", {"--fake-data", "--attention-backend", name});
    EXPECT_EQ(r.config.attention_backend, name);
    EXPECT_EQ(train::bert_model_config(r.config).attention_core, core) << name;
  }
  Resolved r;
  EXPECT_EQ(testing::error_of([&] { resolve(r, "", {"--fake-data", "--attention-backend", "cudnn"}); }),
            "config: --attention-backend must be auto, local, unfused, fused or flash, got 'cudnn'");
}

// Megatron's recomputation flags: selective is --recompute-activations; full needs uniform or block
// and a layer count within a pipeline stage; contradictions are refused naming the flags.
TEST(BertConfig, RecomputationTakesMegatronsThreeFlags) {
  Resolved selective;
  resolve(selective, "", {"--fake-data", "--recompute-granularity", "selective"});
  EXPECT_TRUE(selective.config.recompute_activations);
  Resolved block;
  resolve(block, "", {"--fake-data", "--seq-length", "64", "--dry-run", "--devices", "2", "--num-layers", "8",
                      "--pipeline-model-parallel-size", "2",
                      "--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "4"});
  EXPECT_EQ(block.config.recompute_method, "block");
  EXPECT_EQ(block.config.recompute_num_layers, 4);
  EXPECT_FALSE(block.config.recompute_activations);
  const auto error = [](std::vector<std::string> flags) {
    flags.insert(flags.begin(), "--fake-data");
    Resolved r;
    return testing::error_of([&] { resolve(r, "", flags); });
  };
  EXPECT_EQ(error({"--recompute-granularity", "full"}),
            "config: --recompute-granularity full needs --recompute-method uniform or block, got ''");
  EXPECT_EQ(error({"--recompute-method", "uniform"}),
            "config: --recompute-method uniform needs --recompute-granularity full");
  EXPECT_EQ(error({"--recompute-granularity", "some"}),
            "config: --recompute-granularity must be selective or full, got 'some'");
  EXPECT_EQ(error({"--recompute-activations", "--recompute-granularity", "full", "--recompute-method", "uniform"}),
            "config: --recompute-activations is selective recomputation; --recompute-granularity full recomputes "
            "whole layers: choose one");
  EXPECT_EQ(error({"--num-layers", "8", "--pipeline-model-parallel-size", "2", "--recompute-granularity", "full",
                   "--recompute-method", "uniform", "--recompute-num-layers", "5"}),
            "config: --recompute-num-layers must be between 1 and the 4 layers of a pipeline stage, got 5");
}

// Megatron's --num-layers-per-virtual-pipeline-stage: V = layers of a stage / layers of a chunk.
TEST(BertConfig, InterleavingSplitsEachStageIntoModelChunksOfWholeMicroBatchGroups) {
  const std::vector<std::string> pp2 = {"--fake-data", "--dry-run", "--devices", "2", "--num-layers", "8",
                                        "--pipeline-model-parallel-size", "2", "--micro-batch-size", "2"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), pp2.begin(), pp2.end());
    return more;
  };
  Resolved interleaved;
  resolve(interleaved, "", with({"--num-layers-per-virtual-pipeline-stage", "2", "--global-batch-size", "8"}));
  EXPECT_EQ(interleaved.config.virtual_stages(), 2);
  Resolved toml;
  resolve(toml, "[parallel]\nnum_layers_per_virtual_pipeline_stage = 1\n", with({"--global-batch-size", "4"}));
  EXPECT_EQ(toml.config.virtual_stages(), 4);
  Resolved plain;
  resolve(plain, "", pp2);
  EXPECT_EQ(plain.config.virtual_stages(), 1);

  const auto error = [&](std::vector<std::string> flags) {
    Resolved r;
    return testing::error_of([&] { resolve(r, "", flags); });
  };
  EXPECT_EQ(error(with({"--num-layers-per-virtual-pipeline-stage", "3", "--global-batch-size", "8"})),
            "config: --num-layers-per-virtual-pipeline-stage 3: the 8 layers over 2 pipeline stages do not split "
            "into model chunks of that many");
  EXPECT_EQ(error(with({"--num-layers-per-virtual-pipeline-stage", "2", "--global-batch-size", "6"})),
            "config: the interleaved pipeline schedule needs the micro-batches of a step per pipeline (3) to be a "
            "multiple of --pipeline-model-parallel-size (2)");
  EXPECT_EQ(error({"--fake-data", "--num-layers-per-virtual-pipeline-stage", "1"}),
            "config: --num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size > 1");
  EXPECT_EQ(error(with({"--num-layers-per-virtual-pipeline-stage", "2", "--global-batch-size", "8", "--recompute-granularity", "full",
                        "--recompute-method", "block", "--recompute-num-layers", "3"})),
            "config: --recompute-num-layers must be between 1 and the 2 layers of a model chunk, got 3");
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
