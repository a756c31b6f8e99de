#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kiln/core/error.h"
#include "kiln/train/bert_config.h"
#include "tests/testing/config_flags.h"

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
    const auto path = std::filesystem::temp_directory_path() / "kiln_config_test.toml";
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

}  // namespace
}  // namespace kiln::train
