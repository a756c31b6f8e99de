// tests/train/megatron_test_util.h — the Megatron path in tests: JSON lines -> `kiln prepare
// indexed` (.bin/.idx) and a pre-LN bert-tiny config with AdamW and a linear schedule.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/train/config/bert_config.h"
#include "tests/data/data_test_util.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/test_data.h"

namespace kiln::testing {

// `kiln prepare indexed --split-sentences` on `jsonl`; returns the dataset prefix.
inline std::string prepare_indexed(const std::filesystem::path& jsonl, const std::filesystem::path& prefix) {
  const std::string command = std::string(KILN_BINARY) + " prepare indexed --quiet --split-sentences --input " +
                              jsonl.string() + " --vocab " + test_vocab().string() + " --output-prefix " +
                              prefix.string();
  if (std::system(command.c_str()) != 0) throw Error("{} failed", command);
  return prefix.string() + "_text_sentence";
}

// The first 1.1 MB of the State of the Union addresses as JSON lines, one address per line.
inline std::filesystem::path sotu_jsonl(const std::filesystem::path& dir) {
  data::testing::write_sotu_jsonl(dir / "sotu.jsonl", 1100000);
  return dir / "sotu.jsonl";
}

// Pre-LN bert-tiny on `data_path` (a prepare_indexed prefix) writing to `run`; `extra` are flags.
inline train::BertTrainConfig megatron_tiny(const std::string& data_path, const std::filesystem::path& run,
                                            std::vector<std::string> extra,
                                            std::vector<std::pair<std::string, std::string>>* resolved = nullptr) {
  train::BertTrainConfig c;
  train::ConfigRegistry registry;
  train::register_bert_config(registry, c);
  registry.apply_toml(std::filesystem::path(KILN_SOURCE_DIR) / "configs/bert-tiny.toml");
  registry.set("data.data_path", data_path, "test");
  apply_flag_list(registry, concat({"--vocab-file", test_vocab().string(), "--split", "90,5,5", "--pre-ln",
                                    "--optimizer", "adam", "--lr-decay-style", "linear",
                                    "--lr-warmup-fraction", "0.05", "--output-dir", run.string(),
                                    "--log-interval", "1000"},
                                   extra));
  train::finalize_bert_config(c, registry);
  if (resolved) *resolved = registry.resolved();
  return c;
}

}  // namespace kiln::testing
