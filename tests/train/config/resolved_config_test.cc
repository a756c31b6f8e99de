// The resolved configuration written beside a run's logs reads back, through `--config`, to
// exactly the same resolved values (strings with quotes, paths, floats, booleans); `--help`
// names each flag's type.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "kiln/core/file_util.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/config/resnet_config.h"
#include "kiln/train/config/resolved_config.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/temp_dir.h"

namespace kiln::train {
namespace {

TEST(ResolvedConfig, WrittenFileReadsBackToTheSameValues) {
  BertTrainConfig first;
  ConfigRegistry registry;
  register_bert_config(registry, first);
  testing::apply_flag_list(registry, {"--lr", "0.00123", "--seq-length", "96", "--pre-ln", "--split", "90,5,5",
                                      "--output-dir", "/tmp/a dir/with \"quotes\"", "--lr-decay-style", "cosine"});
  const ResolvedConfig resolved = registry.resolved();
  const std::filesystem::path file = testing::unique_temp_dir("resolved_config") / "config.toml";
  write_resolved_config(file, resolved);
  EXPECT_NE(read_file(file).find("[optim]"), std::string::npos) << read_file(file);

  BertTrainConfig second;
  ConfigRegistry again;
  register_bert_config(again, second);
  again.apply_toml(file);
  EXPECT_EQ(again.resolved(), resolved);
  EXPECT_EQ(second.output_dir, "/tmp/a dir/with \"quotes\"");
  EXPECT_TRUE(second.pre_ln);
}

TEST(ResolvedConfig, ResNetDefaultsReadBackToo) {
  ResNetTrainConfig first, second;
  ConfigRegistry registry, again;
  register_resnet_config(registry, first);
  register_resnet_config(again, second);
  const std::filesystem::path file = testing::unique_temp_dir("resolved_config_resnet") / "config.toml";
  write_resolved_config(file, registry.resolved());
  again.apply_toml(file);
  EXPECT_EQ(again.resolved(), registry.resolved());
}

TEST(ResolvedConfig, HelpNamesEachFlagsType) {
  BertTrainConfig c;
  ConfigRegistry registry;
  register_bert_config(registry, c);
  CLI::App app;
  registry.add_flags(app);
  const std::string help = app.help();
  EXPECT_NE(help.find("--seq-length INT"), std::string::npos) << help;
  EXPECT_NE(help.find("--lr FLOAT"), std::string::npos) << help;
  EXPECT_NE(help.find("--output-dir PATH"), std::string::npos) << help;
  EXPECT_NE(help.find("--lr-decay-style TEXT"), std::string::npos) << help;
}

}  // namespace
}  // namespace kiln::train
