// meta.json of a checkpoint: a missing or mistyped key, or another checkpoint format, is one
// line naming the file and the key (or both format numbers), never a JSON library exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/checkpoint_meta.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"

namespace kiln::io {
namespace {
namespace fs = std::filesystem;
using testing::error_of;

fs::path write_meta(const std::string& name, const std::string& text) {
  const fs::path dir = testing::unique_temp_dir("ckpt_meta_" + name);
  std::ofstream(dir / "meta.json") << text;
  return dir;
}

TEST(CheckpointMeta, SaveRecordsTheFormatAndReadGivesTheKeysBack) {
  const fs::path dir = testing::unique_temp_dir("ckpt_meta_save");
  ParamStore store;
  store.add("w", {2}, true);
  store.allocate();
  const fs::path saved = CheckpointManager(dir / "ckpt", 1).save(
      4, store, {}, {{"step", 4}, {"done", true}, {"mllog", {{"file", "result_bert_1.log"}}}});
  const CheckpointMeta meta = CheckpointMeta::read(saved);
  EXPECT_EQ(meta.integer("format"), kCheckpointFormat);
  EXPECT_EQ(meta.integer("step"), 4);
  EXPECT_TRUE(meta.boolean("done"));
  EXPECT_EQ(meta.string("mllog.file"), "result_bert_1.log");
  EXPECT_FALSE(meta.contains("mllog.bytes"));
  EXPECT_EQ(meta.file(), saved / "meta.json");
}

TEST(CheckpointMeta, MissingKeyNamesTheFileAndTheKey) {
  const fs::path dir = write_meta("missing", R"({"format": 2, "mllog": {"file": "x.log"}})");
  const CheckpointMeta meta = CheckpointMeta::read(dir);
  const std::string file = (dir / "meta.json").string();
  EXPECT_EQ(error_of([&] { meta.integer("step"); }), file + ": key 'step' is missing");
  EXPECT_EQ(error_of([&] { meta.integer("mllog.bytes"); }), file + ": key 'mllog.bytes' is missing");
  EXPECT_EQ(error_of([&] { meta.integer("mllog.file.x"); }), file + ": key 'mllog.file.x' is missing");
}

TEST(CheckpointMeta, WrongTypeNamesTheKeyTheValueAndWhatWasExpected) {
  const fs::path dir = write_meta("type", R"({"format": 2, "step": "six", "done": 1, "file": 3})");
  const CheckpointMeta meta = CheckpointMeta::read(dir);
  const std::string file = (dir / "meta.json").string();
  EXPECT_EQ(error_of([&] { meta.integer("step"); }), file + ": key 'step' is \"six\", expected an integer");
  EXPECT_EQ(error_of([&] { meta.boolean("done"); }), file + ": key 'done' is 1, expected true or false");
  EXPECT_EQ(error_of([&] { meta.string("file"); }), file + ": key 'file' is 3, expected a string");
}

TEST(CheckpointMeta, AnotherFormatIsRefusedNamingBothNumbers) {
  const fs::path old = write_meta("format1", R"({"step": 6, "optimizer_steps": 6})");
  EXPECT_EQ(error_of([&] { CheckpointMeta::read(old); }),
            (old / "meta.json").string() + ": key 'format' is missing: a checkpoint of format 1, this kiln reads format " +
                std::to_string(kCheckpointFormat));
  const fs::path newer = write_meta("format9", R"({"format": 9, "step": 6})");
  EXPECT_EQ(error_of([&] { CheckpointMeta::read(newer); }),
            (newer / "meta.json").string() + ": checkpoint format 9, this kiln reads format " +
                std::to_string(kCheckpointFormat));
}

// "step": 2^64 - 1 read as step -1 and the run resumed "at step -1" with exit 0: every integer
// kiln reads from meta.json is range-checked, an unsigned value past 2^63 - 1 included.
TEST(CheckpointMeta, IntegersOutOfTheirRangeAreRefusedNamingTheKey) {
  const fs::path dir = write_meta("range", R"({"format": 2, "step": 18446744073709551615, "skipped_steps": -1,
      "optimizer_steps": 9223372036854775808, "samples_consumed": 9223372036854775807,
      "mllog": {"bytes": 12, "crc32c": 4294967296}, "run": {"model": {"hidden_size": 0, "num_layers": 2}},
      "other": -9223372036854775808})");
  const CheckpointMeta meta = CheckpointMeta::read(dir);
  const std::string file = (dir / "meta.json").string();
  EXPECT_EQ(error_of([&] { meta.integer("step"); }),
            file + ": key 'step' is 18446744073709551615, expected 0 to 9223372036854775807");
  EXPECT_EQ(error_of([&] { meta.integer("skipped_steps"); }), file + ": key 'skipped_steps' is -1, expected 0 to 9223372036854775807");
  EXPECT_EQ(error_of([&] { meta.integer("optimizer_steps"); }),
            file + ": key 'optimizer_steps' is 9223372036854775808, expected 0 to 9223372036854775807");
  EXPECT_EQ(meta.integer("samples_consumed"), INT64_MAX);
  EXPECT_EQ(meta.integer("mllog.bytes"), 12);
  EXPECT_EQ(error_of([&] { meta.integer("mllog.crc32c"); }),
            file + ": key 'mllog.crc32c' is 4294967296, expected 0 to 4294967295");
  EXPECT_EQ(error_of([&] { meta.integer("run.model.hidden_size"); }),
            file + ": key 'run.model.hidden_size' is 0, expected 1 to 2147483647");
  EXPECT_EQ(meta.integer("run.model.num_layers"), 2);
  EXPECT_EQ(meta.integer("other"), INT64_MIN);
}

TEST(CheckpointMeta, ALossScalerStateOutOfRangeIsRefusedOnRead) {
  for (const auto& [state, problem] : std::vector<std::pair<std::string, std::string>>{
           {R"("x")", "key 'loss_scaler' is \"x\", expected an object"},
           {R"({"scale": 0, "growth_tracker": 0, "hysteresis_tracker": 0})",
            "key 'loss_scaler.scale' is 0, expected a finite number above 0"},
           {R"({"scale": "2", "growth_tracker": 0, "hysteresis_tracker": 0})",
            "key 'loss_scaler.scale' is \"2\", expected a finite number above 0"},
           {R"({"scale": 2.0, "growth_tracker": -3, "hysteresis_tracker": 0})",
            "key 'loss_scaler.growth_tracker' is -3, expected 0 to 9223372036854775807"},
           {R"({"scale": 2.0, "growth_tracker": 1, "hysteresis_tracker": 18446744073709551615})",
            "key 'loss_scaler.hysteresis_tracker' is 18446744073709551615, expected 0 to 9223372036854775807"}}) {
    const fs::path dir = write_meta("scaler", R"({"format": 2, "loss_scaler": )" + state + "}");
    EXPECT_EQ(error_of([&] { CheckpointMeta::read(dir); }), (dir / "meta.json").string() + ": " + problem) << state;
  }
  const fs::path ok = write_meta("scaler_ok", R"({"format": 2, "loss_scaler": {"scale": 2.0, "growth_tracker": 1,
      "hysteresis_tracker": 2}})");
  EXPECT_EQ(CheckpointMeta::read(ok).at("loss_scaler.scale"), 2.0);
}

TEST(CheckpointMeta, UnreadableOrInvalidJsonNamesTheFile) {
  const fs::path bad = write_meta("invalid", "{\"step\": ");
  const std::string message = error_of([&] { CheckpointMeta::read(bad); });
  EXPECT_EQ(message.rfind((bad / "meta.json").string() + ": invalid JSON", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  const fs::path none = testing::unique_temp_dir("ckpt_meta_none");
  EXPECT_NE(error_of([&] { CheckpointMeta::read(none); }).find((none / "meta.json").string()), std::string::npos);
}

}  // namespace
}  // namespace kiln::io
