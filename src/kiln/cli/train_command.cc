// cli/train_command.cc — `kiln train bert|resnet`: resolves the configuration (defaults < preset
// < environment < flags), runs the trainer, and says where the results are.
#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "kiln/cli/commands.h"
#include "kiln/core/error.h"
#include "kiln/dist/world.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/config/resnet_config.h"
#include "kiln/train/recipes/bert.h"
#include "kiln/train/recipes/resnet.h"

namespace kiln::cli {
namespace {

template <typename Config>
struct TrainOptions {
  std::string config_file;
  Config config;
  train::ConfigRegistry registry;
  std::vector<std::pair<std::string, std::string>> extra_flags;  // (key, value) from custom flags

  // The registry holds the flag values CLI11 parsed; apply sources in precedence order.
  std::vector<std::pair<std::string, std::string>> resolve(
      void (*finalize)(Config&, const train::ConfigRegistry&)) {
    if (!config_file.empty()) registry.apply_toml(config_file);
    registry.apply_env();
    registry.apply_flags();
    for (auto& [key, value] : extra_flags) registry.set(key, value, "command line");
    finalize(config, registry);
    return registry.resolved();
  }
};

template <typename Config>
std::shared_ptr<TrainOptions<Config>> add_recipe(CLI::App* train, const char* name, const char* help,
                                                 void (*register_keys)(train::ConfigRegistry&, Config&)) {
  CLI::App* recipe = train->add_subcommand(name, help);
  auto options = std::make_shared<TrainOptions<Config>>();
  recipe->add_option("--config", options->config_file, "preset TOML file (configs/*.toml)")
      ->check(CLI::ExistingFile);
  register_keys(options->registry, options->config);
  options->registry.add_flags(*recipe);
  return options;
}

// Rank 0 names the settings the environment gave (tinygrad's names, e.g. DECAY, are easy to have
// set for something else).
void say_environment(const train::ConfigRegistry& registry) {
  const std::vector<std::string>& env = registry.from_environment();
  if (env.empty() || dist::world().rank() != 0) return;
  std::string joined;
  for (const std::string& e : env) joined += (joined.empty() ? "" : ", ") + e;
  std::cout << "config read from the environment: " << joined << "\n";
}

// The progress line, for a terminal only. Under mpirun rank 0 writes to a pseudo-terminal even when
// the user pipes the output, so several processes never show it.
bool show_progress() { return dist::world().size() == 1 && ::isatty(STDOUT_FILENO) != 0; }

void run_bert(TrainOptions<train::BertTrainConfig>& o, const std::vector<std::string>& data_path) {
  if (!data_path.empty()) {
    std::string joined;
    for (auto& w : data_path) joined += (joined.empty() ? "" : " ") + w;
    o.extra_flags.emplace_back("data.data_path", joined);
  }
  const auto resolved = o.resolve(&train::finalize_bert_config);
  say_environment(o.registry);
  o.config.is_rank0 = dist::world().rank() == 0;
  o.config.progress = show_progress();
  const train::BertRunResult r = train::train_bert(o.config, resolved, std::cout);
  if (o.config.dry_run || !o.config.is_rank0) return;
  if (!r.evals.empty())
    std::cout << fmt::format("final masked-LM accuracy: {:.4f} (after {} steps{})\n",
                             r.evals.back().mlm_accuracy, r.steps,
                             r.reached_target ? ", target reached" : "");
  if (r.skipped_steps > 0)
    std::cout << fmt::format("skipped steps (non-finite loss or gradient norm): {}\n", r.skipped_steps);
  std::cout << fmt::format("MLPerf log: {}\n", r.log_file.string());
  if (!r.checkpoint.empty()) std::cout << fmt::format("checkpoint: {}\n", r.checkpoint.string());
}

void run_resnet(TrainOptions<train::ResNetTrainConfig>& o) {
  const auto resolved = o.resolve(&train::finalize_resnet_config);
  say_environment(o.registry);
  o.config.is_rank0 = dist::world().rank() == 0;
  o.config.progress = show_progress();
  const train::ResNetRunResult r = train::train_resnet(o.config, resolved, std::cout);
  if (o.config.dry_run || !o.config.is_rank0) return;
  if (!r.eval_top1.empty())
    std::cout << fmt::format("final top-1 accuracy: {:.4f} (after {} epochs{})\n", r.eval_top1.back(),
                             r.epochs, r.reached_target ? ", target reached" : "");
  std::cout << fmt::format("MLPerf log: {}\n", r.log_file.string());
  if (!r.checkpoint.empty()) std::cout << fmt::format("checkpoint: {}\n", r.checkpoint.string());
}

}  // namespace

void add_train_command(CLI::App& app) {
  CLI::App* train = app.add_subcommand("train", "train a model");
  train->require_subcommand(1);
  auto bert = add_recipe<train::BertTrainConfig>(
      train, "bert", "BERT pretraining (MLM + NSP) on data from `kiln prepare bert`",
      &train::register_bert_config);
  // Megatron's --data-path takes several words: PREFIX, or WEIGHT PREFIX WEIGHT PREFIX ...
  auto data_path = std::make_shared<std::vector<std::string>>();
  train->get_subcommand("bert")
      ->add_option("--data-path", *data_path,
                   "Megatron .bin/.idx prefix(es), optionally weighted: P | W1 P1 W2 P2 ... [data.data_path]")
      ->expected(1, -1);
  train->get_subcommand("bert")->callback([bert, data_path] { run_bert(*bert, *data_path); });
  auto resnet = add_recipe<train::ResNetTrainConfig>(
      train, "resnet", "ResNet v1.5 image classification on an ImageNet-layout folder",
      &train::register_resnet_config);
  train->get_subcommand("resnet")->callback([resnet] { run_resnet(*resnet); });
}

}  // namespace kiln::cli
