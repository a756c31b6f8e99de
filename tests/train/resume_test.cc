// Resuming from a checkpoint that does not match the run: a setting the math depends on (model
// shape, sequence length, global batch, seed, optimizer, checkpoint format) is refused in one
// line naming the key and both values, unless --no-load-optim / --no-load-rng / --finetune waive
// it, and then the run does what the flag says. A missing meta.json key names the file and key;
// a --load folder that does not exist warns and trains from scratch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <sstream>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/io/checkpoint_contents.h"
#include "kiln/io/checkpoint_meta.h"
#include "kiln/io/safetensors.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/config/resnet_config.h"
#include "kiln/train/recipes/bert.h"
#include "kiln/train/recipes/resnet.h"
#include "kiln/train/resume.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/error_of.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/train/tiny_runs.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;
using testing::with_flags;
using testing::error_of;

// ---- find_resume_point on hand-written checkpoints ----

fs::path checkpoint_with(const std::string& name, const nlohmann::json& meta) {
  const fs::path dir = testing::unique_temp_dir("resume_point_" + name);
  fs::create_directories(dir / "iter_0000004");
  std::ofstream(dir / "iter_0000004" / "meta.json") << meta.dump();
  std::ofstream(dir / "latest_checkpointed_iteration.txt") << "4\n";
  return dir;
}

const RunSettings kSettings = {{"model.hidden_size", 16},
                               {"data.seq_length", 32, RunSetting::Waiver::finetune},
                               {"train.seed", 7, RunSetting::Waiver::no_load_rng},
                               {"optim.optimizer", "lamb", RunSetting::Waiver::no_load_optim}};

nlohmann::json saved_meta(const RunSettings& settings) {
  nlohmann::json meta = {{"format", io::kCheckpointFormat}, {"step", 4}};
  add_run_settings(meta, settings);
  return meta;
}

TEST(Resume, AMatchingCheckpointIsFoundAndItsSettingsAreNested) {
  const fs::path dir = checkpoint_with("match", saved_meta(kSettings));
  std::ostringstream console;
  const ResumePoint point = find_resume_point(dir.string(), {}, kSettings, console);
  ASSERT_TRUE(point.checkpoint);
  EXPECT_EQ(point.checkpoint->dir(), dir / "iter_0000004");
  EXPECT_EQ(point.checkpoint->integer("run.model.hidden_size"), 16);
  EXPECT_EQ(point.checkpoint->string("run.optim.optimizer"), "lamb");
  EXPECT_TRUE(point.continues_run());
  EXPECT_TRUE(point.loads_optimizer());
  EXPECT_EQ(console.str(), "");
}

TEST(Resume, EachMismatchNamesTheKeyBothValuesAndTheFlagThatWaivesIt) {
  const fs::path dir = checkpoint_with("mismatch", saved_meta(kSettings));
  const std::string file = (dir / "iter_0000004" / "meta.json").string();
  auto refused = [&](size_t index, nlohmann::json value, ResumeFlags flags = {}) {
    RunSettings run = kSettings;
    run[index].value = std::move(value);
    std::ostringstream console;
    return error_of([&] { find_resume_point(dir.string(), flags, run, console); });
  };
  EXPECT_EQ(refused(0, 32), file + ": model.hidden_size is 16 in the checkpoint, 32 in this run; a resumed run "
                                   "needs the same model");
  EXPECT_EQ(refused(1, 64), file + ": data.seq_length is 32 in the checkpoint, 64 in this run (--finetune loads only "
                                   "the weights and starts at step 0)");
  EXPECT_EQ(refused(2, 8), file + ": train.seed is 7 in the checkpoint, 8 in this run (--no-load-rng continues with "
                                  "this run's seed; --finetune loads only the weights)");
  EXPECT_EQ(refused(3, "adamw"), file + ": optim.optimizer is \"lamb\" in the checkpoint, \"adamw\" in this run "
                                        "(--no-load-optim starts a fresh optimizer; --finetune loads only the weights)");
  // The flags waive exactly their settings; the model shape never.
  EXPECT_EQ(refused(2, 8, {.no_load_rng = true}), "(no error)");
  EXPECT_EQ(refused(3, "adamw", {.no_load_optim = true}), "(no error)");
  EXPECT_NE(refused(2, 8, {.no_load_optim = true}), "(no error)");
  EXPECT_NE(refused(3, "adamw", {.no_load_rng = true}), "(no error)");
  for (size_t i : {1, 2, 3}) EXPECT_EQ(refused(i, 99, {.finetune = true}), "(no error)") << i;
  EXPECT_NE(refused(0, 32, {.finetune = true}), "(no error)");
}

TEST(Resume, AMissingSettingNamesTheFileAndTheKey) {
  RunSettings fewer = kSettings;
  fewer.pop_back();
  const fs::path dir = checkpoint_with("missing", saved_meta(fewer));
  std::ostringstream console;
  EXPECT_EQ(error_of([&] { find_resume_point(dir.string(), {}, kSettings, console); }),
            (dir / "iter_0000004" / "meta.json").string() + ": key 'run.optim.optimizer' is missing");
}

TEST(Resume, FinetuneAndNoLoadOptimSayWhatIsLoaded) {
  const fs::path dir = checkpoint_with("flags", saved_meta(kSettings));
  std::ostringstream console;
  const ResumePoint finetune = find_resume_point(dir.string(), {.finetune = true}, kSettings, console);
  EXPECT_FALSE(finetune.continues_run());
  EXPECT_FALSE(finetune.loads_optimizer());
  const ResumePoint no_optim = find_resume_point(dir.string(), {.no_load_optim = true}, kSettings, console);
  EXPECT_TRUE(no_optim.continues_run());
  EXPECT_FALSE(no_optim.loads_optimizer());
}

TEST(Resume, ALoadFolderThatDoesNotExistOrIsEmptyWarnsAndStartsFromScratch) {
  const fs::path dir = testing::unique_temp_dir("resume_nothing");
  std::ostringstream console;
  EXPECT_FALSE(find_resume_point((dir / "nowhere").string(), {}, kSettings, console).checkpoint);
  EXPECT_EQ(console.str(), "warning: --load " + (dir / "nowhere").string() + " does not exist: training from scratch\n");
  std::ostringstream empty;
  EXPECT_FALSE(find_resume_point(dir.string(), {}, kSettings, empty).checkpoint);
  EXPECT_EQ(empty.str(), "warning: --load " + dir.string() +
                             " holds no checkpoint (no latest_checkpointed_iteration.txt): training from scratch\n");
}

// Rewrites `file` with element `index` of tensor `name` set to `value` (the others unchanged).
void poison(const fs::path& file, const std::string& name, int64_t index, float value) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  {
    const io::SafetensorsFile in = io::SafetensorsFile::open(file);
    for (const std::string& n : in.names()) {
      const Tensor t = in.get(n);
      Tensor copy = Tensor::empty(t.shape, t.dtype);
      std::memcpy(copy.data, t.data, t.nbytes());
      if (n == name) copy.ptr<float>()[index] = value;
      tensors.emplace_back(n, copy);
    }
  }
  io::save_safetensors(file, tensors);
  // As if saved so: meta.json records the new contents (where there is one).
  const fs::path meta = file.parent_path() / "meta.json";
  if (!fs::exists(meta)) return;
  nlohmann::json json = nlohmann::json::parse(read_file(meta));
  json["contents"] = io::checkpoint_contents(file.parent_path());
  std::ofstream(meta) << json.dump(2);
}

// NaN or Inf in resumed weights was loaded with exit 0: the weights, and the optimizer state when
// the optimizer is loaded, are refused naming the file and the tensor, unless allow_non_finite.
TEST(Resume, NonFiniteWeightsOrOptimizerStateAreRefusedUnlessAllowed) {
  const fs::path dir = checkpoint_with("non_finite", saved_meta(kSettings));
  Tensor w = Tensor::empty({2, 3}), m = Tensor::empty({2, 3});
  for (int i = 0; i < 6; ++i) w.ptr<float>()[i] = m.ptr<float>()[i] = 0.5f - 0.25f * float(i);
  const fs::path model = dir / "iter_0000004" / "model.safetensors", optimizer = dir / "iter_0000004" / "optimizer.safetensors";
  io::save_safetensors(model, {{"w", w}});
  io::save_safetensors(optimizer, {{"exp_avg.w", m}});
  std::ostringstream console;
  const auto resume = [&](ResumeFlags flags) {
    return error_of([&] { find_resume_point(dir.string(), flags, kSettings, console); });
  };
  EXPECT_EQ(resume({}), "(no error)");
  poison(optimizer, "exp_avg.w", 4, std::numeric_limits<float>::infinity());
  EXPECT_EQ(resume({}), optimizer.string() + ": tensor 'exp_avg.w' holds Inf at element 4 (1 of 6 values are not "
                                             "finite); --allow-non-finite loads it anyway");
  EXPECT_EQ(resume({.no_load_optim = true}), "(no error)");  // the optimizer state is not loaded
  EXPECT_EQ(resume({.finetune = true}), "(no error)");
  poison(model, "w", 2, std::nanf(""));
  EXPECT_EQ(resume({.finetune = true}), model.string() + ": tensor 'w' holds NaN at element 2 (1 of 6 values are not "
                                                         "finite); --allow-non-finite loads it anyway");
  EXPECT_EQ(resume({.allow_non_finite = true}), "(no error)");
}

// ---- through `kiln train bert` / `train resnet` ----

const testing::TinyBert& bert_data() {
  static const testing::TinyBert data = testing::tiny_bert(testing::unique_temp_dir("resume_bert_data"));
  return data;
}

BertTrainConfig bert(const std::vector<std::string>& extra) {
  BertTrainConfig c;
  ConfigRegistry registry;
  register_bert_config(registry, c);
  testing::apply_flag_list(registry, with_flags(bert_data().flags, extra));
  finalize_bert_config(c, registry);
  return c;
}

// A run stopped after step 4 with a checkpoint there; resume(extra) continues it to step 8.
struct StoppedBert {
  fs::path dir;
  std::ostringstream console;
  const testing::ThreadsRestored threads;
  explicit StoppedBert(const std::string& name) : dir(testing::unique_temp_dir("resume_" + name)) {
    train_bert(bert(flags({"--exit-interval", "4"})), {}, console);
  }
  std::vector<std::string> flags(const std::vector<std::string>& extra) const {
    return with_flags({"--output-dir", (dir / "run").string(), "--save", (dir / "ckpt").string(), "--load",
                       (dir / "ckpt").string(), "--save-interval", "4", "--eval-interval", "100"},
                      extra);
  }
  BertRunResult resume(const std::vector<std::string>& extra) {
    return train_bert(bert(flags(with_flags({"--exit-interval", "8"}, extra))), {}, console);
  }
  fs::path meta() const { return dir / "ckpt" / "iter_0000004" / "meta.json"; }
  io::CheckpointMeta saved(int64_t step) const {
    return io::CheckpointMeta::read(dir / "ckpt" / fmt::format("iter_{:07d}", step));
  }
};

TEST(Resume, BertRefusesAnotherModelBatchSeedOrOptimizer) {
  StoppedBert run("bert_refuses");
  const std::string file = run.meta().string();
  EXPECT_EQ(error_of([&] { run.resume({"--num-attention-heads", "1"}); }),
            file + ": model.num_attention_heads is 2 in the checkpoint, 1 in this run; a resumed run needs the same model");
  EXPECT_EQ(error_of([&] { run.resume({"--num-layers", "2"}); }),
            file + ": model.num_layers is 1 in the checkpoint, 2 in this run; a resumed run needs the same model");
  EXPECT_EQ(error_of([&] { run.resume({"--global-batch-size", "16"}); }),
            file + ": train.global_batch_size is 8 in the checkpoint, 16 in this run (--finetune loads only the "
                   "weights and starts at step 0)");
  EXPECT_NE(error_of([&] { run.resume({"--seed", "8"}); }).find("train.seed is 7 in the checkpoint, 8 in this run"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run.resume({"--optimizer", "adamw"}); })
                .find("optim.optimizer is \"lamb\" in the checkpoint, \"adamw\" in this run"),
            std::string::npos);
}

TEST(Resume, NoLoadOptimContinuesTheRunWithAFreshOptimizer) {
  StoppedBert run("bert_no_optim");
  const BertRunResult r = run.resume({"--optimizer", "adamw", "--no-load-optim"});
  EXPECT_EQ(r.losses.size(), 4u) << run.console.str();
  EXPECT_EQ(r.steps, 8);
  const io::CheckpointMeta meta = run.saved(8);
  EXPECT_EQ(meta.integer("step"), 8);
  EXPECT_EQ(meta.integer("optimizer_steps"), 4);  // counted again from 0: the LR schedule restarted
  EXPECT_EQ(meta.string("run.optim.optimizer"), "adamw");
  EXPECT_NE(run.console.str().find("--no-load-optim: the optimizer starts fresh"), std::string::npos);
}

TEST(Resume, NoLoadRngContinuesWithThisRunsSeed) {
  StoppedBert run("bert_no_rng");
  const BertRunResult r = run.resume({"--seed", "8", "--no-load-rng"});
  EXPECT_EQ(r.losses.size(), 4u) << run.console.str();
  EXPECT_EQ(run.saved(8).integer("run.train.seed"), 8);
  EXPECT_EQ(run.saved(8).integer("optimizer_steps"), 8);
  // The MLPerf log continues: the one the checkpoint's run wrote, with its single preamble.
  EXPECT_EQ(r.log_file, run.dir / "run" / "result_bert_7.log");
}

TEST(Resume, FinetuneLoadsOnlyTheWeightsAndStartsANewRun) {
  StoppedBert run("bert_finetune");
  const std::vector<std::string> other = {"--global-batch-size", "16", "--seed", "9", "--optimizer", "adamw",
                                          "--train-iters", "3", "--output-dir", (run.dir / "tuned").string()};
  const BertRunResult tuned = train_bert(bert(with_flags(run.flags({"--finetune"}), other)), {}, run.console);
  ASSERT_EQ(tuned.losses.size(), 3u) << run.console.str();
  EXPECT_NE(run.console.str().find("--finetune: loaded the weights of " + (run.dir / "ckpt" / "iter_0000004").string()),
            std::string::npos);
  const BertRunResult scratch =
      train_bert(bert(with_flags(other, {"--output-dir", (run.dir / "scratch").string()})), {}, run.console);
  EXPECT_NE(tuned.losses[0], scratch.losses[0]);  // the weights came from the checkpoint
  EXPECT_EQ(tuned.log_file, run.dir / "tuned" / "result_bert_9.log");
  EXPECT_NE(read_file(tuned.log_file).find("\"key\": \"run_start\""), std::string::npos);
}

// A run's checkpoints carry its lineage ("run_id"): a resumed run keeps it (and so prunes the
// checkpoints it resumed from), --finetune starts a new one.
TEST(Resume, AResumedRunKeepsItsRunIdAndFinetuneStartsANewOne) {
  StoppedBert run("bert_run_id");
  const std::string first = run.saved(4).string("run_id");
  EXPECT_EQ(first.size(), 16u);
  run.resume({});
  EXPECT_EQ(run.saved(8).string("run_id"), first);
  train_bert(bert(run.flags({"--finetune", "--train-iters", "2", "--save-interval", "2", "--save",
                             (run.dir / "tuned_ckpt").string(), "--output-dir", (run.dir / "tuned").string()})),
             {}, run.console);
  const std::string tuned = io::CheckpointMeta::read(run.dir / "tuned_ckpt" / "iter_0000002").string("run_id");
  EXPECT_NE(tuned, first);
}

TEST(Resume, AMissingMetaKeyIsOneLineNamingTheFileAndKey) {
  StoppedBert run("bert_missing_key");
  nlohmann::json meta = nlohmann::json::parse(read_file(run.meta()));
  meta.erase("samples_consumed");
  std::ofstream(run.meta()) << meta.dump();
  EXPECT_EQ(error_of([&] { run.resume({}); }), run.meta().string() + ": key 'samples_consumed' is missing");
  meta["run"]["train"].erase("seed");
  std::ofstream(run.meta()) << meta.dump();
  // The command: one line on stderr, exit status 2.
  std::string command = std::string(KILN_BINARY) + " train bert";
  for (const std::string& f : with_flags(bert_data().flags, run.flags({}))) command += " '" + f + "'";
  const auto [status, out] = testing::run_command(command, testing::Capture::stderr_only);
  EXPECT_EQ(status, 2) << out;
  EXPECT_EQ(out, "kiln: error: " + run.meta().string() + ": key 'run.train.seed' is missing\n");
}

// Through the command: a NaN in the checkpoint's weights ends `kiln train bert --load` with one
// line naming the file and the tensor, exit 2; --allow-non-finite reaches the check (the flag is
// registered for BERT and ResNet alike).
TEST(Resume, BertRefusesNonFiniteResumedWeightsAndTheFlagIsRegistered) {
  StoppedBert run("bert_non_finite");
  const fs::path model = run.dir / "ckpt" / "iter_0000004" / "model.safetensors";
  poison(model, "bert.pooler.dense.bias", 3, -std::numeric_limits<float>::infinity());
  std::string command = std::string(KILN_BINARY) + " train bert";
  for (const std::string& f : with_flags(bert_data().flags, run.flags({}))) command += " '" + f + "'";
  const auto [status, out] = testing::run_command(command, testing::Capture::stderr_only);
  EXPECT_EQ(status, 2) << out;
  EXPECT_EQ(out, "kiln: error: " + model.string() + ": tensor 'bert.pooler.dense.bias' holds -Inf at element 3 (1 of "
                     "16 values are not finite); --allow-non-finite loads it anyway\n");
  EXPECT_TRUE(bert({"--allow-non-finite"}).resume.allow_non_finite);
  EXPECT_FALSE(bert({}).resume.allow_non_finite);
  ResNetTrainConfig c;
  ConfigRegistry registry;
  register_resnet_config(registry, c);
  testing::apply_flag_list(registry, {"--allow-non-finite"});
  EXPECT_TRUE(c.resume.allow_non_finite);
}

TEST(Resume, ACheckpointOfAnotherFormatIsRefused) {
  StoppedBert run("bert_format");
  nlohmann::json meta = nlohmann::json::parse(read_file(run.meta()));
  meta["format"] = 1;
  std::ofstream(run.meta()) << meta.dump();
  EXPECT_EQ(error_of([&] { run.resume({}); }),
            run.meta().string() + ": checkpoint format 1, this kiln reads format " + std::to_string(io::kCheckpointFormat));
}

// meta.json records each tensor file's size and CRC-32; a file that no longer matches is named,
// with what it holds and what was recorded, before anything loads it.
TEST(Resume, ATensorFileThatDiffersFromWhatMetaJsonRecordsIsRefused) {
  StoppedBert run("bert_damaged");
  const io::CheckpointMeta meta = run.saved(4);
  const fs::path model = meta.dir() / "model.safetensors";
  EXPECT_EQ(meta.at("contents").at("model.safetensors").at("bytes"), fs::file_size(model));
  EXPECT_TRUE(meta.at("contents").contains("optimizer.safetensors"));
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4, std::ios::end);
    f.put('\x7f');
  }
  const std::string error = error_of([&] { run.resume({}); });
  EXPECT_EQ(error.find(meta.dir().string() + ": model.safetensors has crc32 \""), 0u) << error;
  EXPECT_NE(error.find("meta.json records \"" + meta.at("contents").at("model.safetensors").at("crc32").get<std::string>() +
                       "\": the checkpoint is damaged; resume from another one"),
            std::string::npos)
      << error;
}

TEST(Resume, BertLoadFolderThatDoesNotExistWarnsAndTrainsFromScratch) {
  const fs::path dir = testing::unique_temp_dir("resume_bert_scratch");
  std::ostringstream console;
  const testing::ThreadsRestored threads;
  const std::vector<std::string> common = {"--train-iters", "3", "--eval-interval", "100"};
  const BertRunResult plain = train_bert(bert(with_flags(common, {"--output-dir", (dir / "a").string()})), {}, console);
  std::ostringstream warned;
  const BertRunResult loaded = train_bert(
      bert(with_flags(common, {"--output-dir", (dir / "b").string(), "--load", (dir / "nowhere").string()})), {}, warned);
  EXPECT_NE(warned.str().find("warning: --load " + (dir / "nowhere").string() + " does not exist: training from scratch"),
            std::string::npos)
      << warned.str();
  EXPECT_EQ(loaded.losses, plain.losses);
}

TEST(Resume, ResNetRefusesAnotherWidth) {
  const fs::path dir = testing::unique_temp_dir("resume_resnet");
  const testing::TinyResNet data = testing::tiny_resnet(dir / "images");
  auto resnet = [&](const std::vector<std::string>& extra) {
    ResNetTrainConfig c;
    ConfigRegistry registry;
    register_resnet_config(registry, c);
    testing::apply_flag_list(registry, with_flags(with_flags(data.flags, {"--output-dir", (dir / "run").string(), "--save",
                                                                          (dir / "ckpt").string(), "--load",
                                                                          (dir / "ckpt").string()}),
                                                  extra));
    finalize_resnet_config(c, registry);
    return c;
  };
  std::ostringstream console;
  const testing::ThreadsRestored threads;
  train_resnet(resnet({"--exit-interval", "2"}), {}, console);
  EXPECT_EQ(error_of([&] { train_resnet(resnet({"--width", "8"}), {}, console); }),
            (dir / "ckpt" / "iter_0000002" / "meta.json").string() +
                ": model.width is 4 in the checkpoint, 8 in this run; a resumed run needs the same model");
}

}  // namespace
}  // namespace kiln::train
