// Bad input to `kiln train bert` / `kiln prepare bert`: one line on stderr that names the file,
// key or variable, exit code 2, and nothing half-written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/data/data_test_util.h"
#include "tests/testing/run_command.h"

namespace {
namespace fs = std::filesystem;
using kiln::data::testing::fresh_temp_dir;
using kiln::data::testing::test_vocab;

struct Outcome {
  int code;
  std::string output;  // stderr only
};

Outcome run(const std::string& command) {
  auto [code, output] = kiln::testing::run_command(command, kiln::testing::Capture::stderr_only);
  return {code, output};
}

// stderr must be exactly one line, "kiln: error: ...", naming `must_name`.
void expect_one_line_error(const Outcome& o, const std::string& must_name) {
  EXPECT_EQ(o.code, 2) << o.output;
  EXPECT_EQ(o.output.find("kiln: error:"), 0u) << o.output;
  EXPECT_EQ(o.output.find('\n'), o.output.size() - 1) << "error is not one line: " << o.output;
  EXPECT_NE(o.output.find(must_name), std::string::npos)
      << "error does not name " << must_name << ": " << o.output;
}

// `bytes` of the State of the Union text prepared as 32-token samples into DIR/data.
Outcome prepare_small_bert_data(const fs::path& dir, size_t bytes) {
  kiln::data::testing::write_text(dir / "text.txt", kiln::data::testing::sotu_sentences(bytes));
  return run(std::string(KILN_BINARY) + " prepare bert --input " + (dir / "text.txt").string() + " --vocab " +
             test_vocab().string() + " --output " + (dir / "data").string() +
             " --max-seq-length 32 --max-predictions 5 --dupe-factor 1 --eval-samples 16");
}

const std::string kTrain = std::string(KILN_BINARY) + " train bert --config " KILN_SOURCE_DIR
                           "/configs/bert-tiny.toml --fake-data --seq-length 32 --benchmark 1";

TEST(TrainErrors, MissingVocabFileIsNamed) {
  const fs::path dir = fresh_temp_dir("missing-vocab");
  expect_one_line_error(run(kTrain + " --output-dir " + dir.string() + " --vocab /nonexistent/vocab.txt"),
                        "/nonexistent/vocab.txt");
}

TEST(TrainErrors, EmptyVocabFileIsNamed) {
  const fs::path dir = fresh_temp_dir("empty-vocab");
  std::ofstream(dir / "vocab.txt").flush();
  expect_one_line_error(run(kTrain + " --output-dir " + dir.string() + " --vocab " + (dir / "vocab.txt").string()),
                        (dir / "vocab.txt").string());
}

TEST(TrainErrors, ConfigVocabSmallerThanVocabFileIsNamed) {
  const fs::path dir = fresh_temp_dir("small-vocab");
  const Outcome o = run(kTrain + " --output-dir " + dir.string() + " --vocab-size 1000 --vocab " +
                        test_vocab().string());
  expect_one_line_error(o, "model.vocab_size");
  EXPECT_NE(o.output.find("30522"), std::string::npos) << o.output;
}

TEST(TrainErrors, UnsupportedTensorParallelRunsAreRefusedInOneLine) {
  const fs::path dir = fresh_temp_dir("tp-pp");
  const std::string train = kTrain + " --output-dir " + dir.string();
  const std::string tp2 = train + " --tensor-model-parallel-size 2";
  expect_one_line_error(run(tp2), "1 devices do not split into --tensor-model-parallel-size 2");
  expect_one_line_error(run(tp2 + " --pipeline-model-parallel-size 2"),
                        "1 devices do not split into --tensor-model-parallel-size 2 x --pipeline-model-parallel-size 2: "
                        "start a multiple of 4");
  expect_one_line_error(run(tp2 + " --num-attention-heads 3 --hidden-size 129"),
                        "model.num_attention_heads 3 is not divisible by it");
}

TEST(TrainErrors, UnknownConfigKeyIsNamed) {
  const fs::path dir = fresh_temp_dir("unknown-key");
  std::ofstream(dir / "bad.toml") << "[optim]\nlearning_rate = 0.1\n";
  expect_one_line_error(run(std::string(KILN_BINARY) + " train bert --fake-data --seq-length 32 --config " +
                            (dir / "bad.toml").string() + " --output-dir " + dir.string()),
                        "optim.learning_rate");
}

TEST(TrainErrors, NonNumericEnvironmentValueIsNamed) {
  const fs::path dir = fresh_temp_dir("bad-env");
  expect_one_line_error(run("BS=lots " + kTrain + " --output-dir " + dir.string()), "BS");
}

TEST(TrainErrors, UnwritableOutputDirectoryIsNamed) {
  expect_one_line_error(run(kTrain + " --output-dir /proc/kiln-cannot-write"), "/proc/kiln-cannot-write");
}

TEST(TrainErrors, CorruptShardIsNamedAndPreparedDataIsUntouched) {
  const fs::path dir = fresh_temp_dir("corrupt-shard");
  const Outcome prepared = prepare_small_bert_data(dir, 60000);
  ASSERT_EQ(prepared.code, 0) << prepared.output;
  const fs::path shard = dir / "data/train/part-00000.kbs";
  ASSERT_TRUE(fs::exists(shard));
  fs::resize_file(shard, fs::file_size(shard) - 7);
  const std::string train = std::string(KILN_BINARY) + " train bert --config " KILN_SOURCE_DIR
                            "/configs/bert-tiny.toml --train-iters 1 --data " + (dir / "data").string() +
                            " --output-dir " + (dir / "run").string();
  expect_one_line_error(run(train), shard.string());
  EXPECT_FALSE(fs::exists(dir / "run" / "result_bert_12345.log"))
      << "a run that never started must not leave an MLPerf log";
}

// The reference and tinygrad start the timed run from the MLPerf checkpoint; so does kiln's run
// phase, unless the user asks for random weights. Nothing is written before it stops.
TEST(TrainErrors, RunPhaseWithoutTheMlperfCheckpointSaysHowToGetIt) {
  const fs::path dir = fresh_temp_dir("run-phase-weights");
  const Outcome prepared = prepare_small_bert_data(dir, 30000);
  ASSERT_EQ(prepared.code, 0) << prepared.output;
  const std::string train = std::string(KILN_BINARY) + " train bert --config " KILN_SOURCE_DIR
                            "/configs/bert-tiny.toml --train-iters 1 --data " + (dir / "data").string() +
                            " --output-dir " + (dir / "run").string();
  const Outcome refused = run("RUNMLPERF=1 " + train);
  expect_one_line_error(refused, "the MLPerf run phase starts from the MLPerf checkpoint model.ckpt-28252: set "
                                 "--init-checkpoint DIR or INIT_CKPT_DIR (scripts/download_bert_data.sh fetches it), "
                                 "or --init-random for random weights");
  EXPECT_TRUE(!fs::exists(dir / "run") || fs::is_empty(dir / "run")) << "nothing may be written";
  // --init-random passes this check; the run phase then wants its init phase's log.
  expect_one_line_error(run("RUNMLPERF=1 " + train + " --init-random"), "run the init phase first");
  // Outside the run phase random weights stay the default.
  EXPECT_EQ(run(train).code, 0);
}

TEST(PrepareErrors, UnwritableOutputDirectoryIsNamed) {
  const fs::path dir = fresh_temp_dir("prepare-unwritable");
  kiln::data::testing::write_text(dir / "text.txt", kiln::data::testing::sotu_sentences(20000));
  expect_one_line_error(run(std::string(KILN_BINARY) + " prepare bert --input " + (dir / "text.txt").string() +
                            " --vocab " + test_vocab().string() + " --output /proc/kiln-cannot-write"),
                        "/proc/kiln-cannot-write");
}

TEST(TrainErrors, GpusThatTheLauncherDidNotStartIsNamed) {
  const fs::path dir = fresh_temp_dir("gpus_variable");
  expect_one_line_error(run("GPUS=8 " + kTrain + " --output-dir " + dir.string()),
                        "8 devices (GPUS, --devices or parallel.devices): kiln runs one process per device; start 8 with mpirun -np 8 (this is 1 process)");
  EXPECT_EQ(run("GPUS=1 " + kTrain + " --output-dir " + dir.string()).code, 0);
}

}  // namespace
