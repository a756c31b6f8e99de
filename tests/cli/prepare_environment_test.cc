// `kiln prepare bert` reads tinygrad's preparation variables (extra/datasets/wikipedia.py:
// MAX_SEQ_LENGTH, MAX_PREDICTIONS_PER_SEQ, MASKED_LM_PROB, SHORT_SEQ_PROB, DUPE_FACTOR,
// RANDOM_SEED, NUM_WORKERS; BASEDIR for the output); a flag wins over its variable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/data/data_test_util.h"
#include "tests/testing/run_command.h"

namespace {
namespace fs = std::filesystem;
using kiln::data::testing::fresh_temp_dir;
using kiln::data::testing::test_vocab;

nlohmann::json manifest_options(const fs::path& data) {
  std::ifstream in(data / "manifest.json");
  return nlohmann::json::parse(in).at("options");
}

TEST(PrepareEnvironment, TinygradsVariablesSetTheOptionsAndFlagsWin) {
  const fs::path dir = fresh_temp_dir("prepare-environment");
  kiln::data::testing::write_text(dir / "text.txt", kiln::data::testing::sotu_sentences(30000));
  const std::string prepare = std::string(KILN_BINARY) + " prepare bert --input " + (dir / "text.txt").string() +
                              " --vocab " + test_vocab().string() + " --eval-samples 8";
  const std::string env = "MAX_SEQ_LENGTH=48 MAX_PREDICTIONS_PER_SEQ=6 MASKED_LM_PROB=0.2 SHORT_SEQ_PROB=0.3 "
                          "DUPE_FACTOR=2 RANDOM_SEED=99 NUM_WORKERS=1 BASEDIR=" + (dir / "env").string() + " ";
  const auto [code, output] = kiln::testing::run_command(env + prepare);
  ASSERT_EQ(code, 0) << output;
  const nlohmann::json o = manifest_options(dir / "env");
  EXPECT_EQ(o.at("max_seq_length"), 48);
  EXPECT_EQ(o.at("max_predictions"), 6);
  EXPECT_DOUBLE_EQ(o.at("masked_lm_prob").get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(o.at("short_seq_prob").get<double>(), 0.3);
  EXPECT_EQ(o.at("dupe_factor"), 2);
  EXPECT_EQ(o.at("seed"), 99);

  const auto [flag_code, flag_output] = kiln::testing::run_command(
      env + prepare + " --max-seq-length 32 --dupe-factor 1 --output " + (dir / "flags").string());
  ASSERT_EQ(flag_code, 0) << flag_output;
  const nlohmann::json f = manifest_options(dir / "flags");
  EXPECT_EQ(f.at("max_seq_length"), 32);
  EXPECT_EQ(f.at("dupe_factor"), 1);
  EXPECT_EQ(f.at("max_predictions"), 6);  // still the variable's
}

}  // namespace
