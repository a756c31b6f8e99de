// cli/checkpoint_command.cc — `kiln checkpoint export --format hf` and `kiln checkpoint import
// --format hf`: BERT checkpoints to and from Hugging Face transformers (train/hf/hf_bert.h).
#include <cstdio>
#include <memory>
#include <string>

#include "kiln/cli/commands.h"
#include "kiln/train/hf/hf_bert.h"

namespace kiln::cli {
namespace {

void add_export(CLI::App& checkpoint) {
  struct Args {
    std::string format, load, vocab, output;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = checkpoint.add_subcommand(
      "export", "a kiln BERT checkpoint -> a Hugging Face BertForPreTraining directory (config.json, "
                "model.safetensors, vocab.txt)");
  cmd->add_option("--format", a->format, "hf (Hugging Face transformers)")->required()->check(CLI::IsMember({"hf"}));
  cmd->add_option("--load", a->load, "checkpoint folder (its newest checkpoint) or one iter_NNNNNNN folder")->required();
  cmd->add_option("--vocab", a->vocab, "the vocab.txt the model was trained with (its size unpads the vocabulary)")
      ->required();
  cmd->add_option("--output", a->output, "directory to write")->required();
  cmd->callback([a] {
    const train::HfExportSummary s = train::export_hf_bert(a->load, a->vocab, a->output);
    std::printf("checkpoint export: %s -> %s (%lld tensors, vocab %lld)\n", s.checkpoint.c_str(), a->output.c_str(),
                static_cast<long long>(s.tensors), static_cast<long long>(s.vocab_size));
  });
}

void add_import(CLI::App& checkpoint) {
  struct Args {
    std::string format, input, output;
    int64_t divisible_by = 1, seed = 12345;
    bool allow_non_finite = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = checkpoint.add_subcommand(
      "import", "a Hugging Face BERT directory (config.json + model.safetensors) -> a kiln checkpoint for "
                "`kiln train bert --load DIR --finetune`");
  cmd->add_option("--format", a->format, "hf (Hugging Face transformers)")->required()->check(CLI::IsMember({"hf"}));
  cmd->add_option("input", a->input, "the Hugging Face model directory")->required();
  cmd->add_option("--output", a->output, "kiln checkpoint folder to write (iter_0000000)")->required();
  cmd->add_option("--make-vocab-size-divisible-by", a->divisible_by,
                  "pad the vocabulary as the training run will (its --make-vocab-size-divisible-by)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the initialisation of parameters the checkpoint lacks")
      ->capture_default_str();
  cmd->add_flag("--allow-non-finite", a->allow_non_finite, "import tensors that hold NaN or Inf (refused otherwise)");
  cmd->callback([a] {
    const train::HfImportSummary s =
        train::import_hf_bert(a->input, a->output, a->divisible_by, uint64_t(a->seed), a->allow_non_finite);
    for (const std::string& name : s.initialised)
      std::printf("checkpoint import: %s is not in the checkpoint: initialised\n", name.c_str());
    std::printf("checkpoint import: %s -> %s\n", a->input.c_str(), s.checkpoint.c_str());
  });
}

}  // namespace

void add_checkpoint_command(CLI::App& app) {
  CLI::App* checkpoint = app.add_subcommand("checkpoint", "convert checkpoints to and from other frameworks");
  checkpoint->require_subcommand(1);
  add_export(*checkpoint);
  add_import(*checkpoint);
}

}  // namespace kiln::cli
