// cli/train_command.cc — `kiln train bert`: resolves the configuration, runs the trainer, and
// says where the results are.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "kiln/cli/commands.h"
#include "kiln/train/bert_config.h"
#include "kiln/train/bert_trainer.h"

namespace kiln::cli {
namespace {

struct TrainBertOptions {
  std::string config_file;
  train::BertTrainConfig config;
  train::ConfigRegistry registry;
};

int run_train_bert(TrainBertOptions& o) {
  // The registry holds the flag values CLI11 parsed; rebuild the config in precedence order.
  train::BertTrainConfig& c = o.config;
  if (!o.config_file.empty()) o.registry.apply_toml(o.config_file);
  o.registry.apply_env();
  o.registry.apply_flags();
  train::finalize_bert_config(c, o.registry);
  const auto resolved = o.registry.resolved();
  const train::BertRunResult r = train::train_bert(c, resolved, std::cout);
  if (!r.evals.empty())
    std::cout << fmt::format("final masked-LM accuracy: {:.4f} (after {} steps{})\n",
                             r.evals.back().mlm_accuracy, r.steps,
                             r.reached_target ? ", target reached" : "");
  std::cout << fmt::format("MLPerf log: {}\n", r.log_file.string());
  if (!r.checkpoint.empty()) std::cout << fmt::format("checkpoint: {}\n", r.checkpoint.string());
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app) {
  CLI::App* train = app.add_subcommand("train", "train a model");
  train->require_subcommand(1);
  CLI::App* bert = train->add_subcommand(
      "bert", "BERT pretraining (MLM + NSP) on data from `kiln prepare bert`");
  auto options = std::make_shared<TrainBertOptions>();
  bert->add_option("--config", options->config_file, "preset TOML file (configs/*.toml)")
      ->check(CLI::ExistingFile);
  train::register_bert_config(options->registry, options->config);
  options->registry.add_flags(*bert);
  bert->callback([options] {
    const int code = run_train_bert(*options);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace kiln::cli
