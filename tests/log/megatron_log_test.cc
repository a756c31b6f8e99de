#include "kiln/log/megatron_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <filesystem>

#include "kiln/core/file_util.h"
#include "kiln/log/tensorboard.h"

namespace kiln::log {
namespace {

namespace fs = std::filesystem;

// 2024-05-01 12:34:56.123456 local time, as Megatron's datetime.now() would print it.
std::chrono::system_clock::time_point sample_time() {
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 4;
  t.tm_mday = 1;
  t.tm_hour = 12;
  t.tm_min = 34;
  t.tm_sec = 56;
  t.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&t)) + std::chrono::microseconds(123456);
}

MegatronTrainLog sample_log() {
  MegatronTrainLog g;
  g.iteration = 100;
  g.train_iters = 1000;
  g.consumed_samples = 3200;
  g.elapsed_ms_per_iteration = 301.25;
  g.learning_rate = 1e-4;
  g.global_batch_size = 32;
  g.losses = {{"lm loss", 7.1234564}, {"sop loss", 0.69314718}};
  g.loss_scale = 1.0;
  g.grad_norm = 1.2345;
  return g;
}

// Expected strings below were produced by Megatron's own format statements in Python 3.
TEST(MegatronLog, TrainLineMatchesMegatronsFormatByteForByte) {
  EXPECT_EQ(megatron_train_line(sample_log(), sample_time()),
            " [2024-05-01 12:34:56.123456] iteration      100/    1000 | consumed samples:         "
            "3200 | elapsed time per iteration (ms): 301.2 | learning rate: 1.000000E-04 | global "
            "batch size:    32 | lm loss: 7.123456E+00 | sop loss: 6.931472E-01 | loss scale: 1.0 | "
            "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |");
}

TEST(MegatronLog, OptionalFieldsAppearInMegatronsOrder) {
  MegatronTrainLog g = sample_log();
  g.iteration = 12345678;
  g.train_iters = 99999999;
  g.skipped_samples = 64;
  g.tflops_per_device = 41.55;
  g.losses = {{"lm loss", 6.5}, {"sop loss", -1.0}};  // a negative average is not printed
  g.loss_scale = 65536.0;
  g.grad_norm.reset();                                 // last step skipped
  g.num_zeros = 17;
  g.params_norm = 250.0625;
  g.skipped_iterations = 3;
  g.nan_iterations = 1234;
  EXPECT_EQ(megatron_train_line(g, sample_time()),
            " [2024-05-01 12:34:56.123456] iteration 12345678/99999999 | consumed samples:         "
            "3200 | skipped samples:           64 | elapsed time per iteration (ms): 301.2 | "
            "throughput per GPU (TFLOP/s/GPU): 41.5 | learning rate: 1.000000E-04 | global batch "
            "size:    32 | lm loss: 6.500000E+00 | loss scale: 65536.0 | num zeros: 17 | params "
            "norm: 250.062 | number of skipped iterations:   3 | number of nan iterations: 1234 |");
}

TEST(MegatronLog, TimestampHasMicroseconds) {
  EXPECT_EQ(megatron_timestamp(sample_time()), " [2024-05-01 12:34:56.123456]");
  EXPECT_EQ(megatron_timestamp(sample_time() - std::chrono::microseconds(123456)),
            " [2024-05-01 12:34:56.000000]");
}

TEST(MegatronLog, ValidationBlockIsFramedByDashesOneLongerThanTheText) {
  const std::string text =
      " validation loss at iteration 1000 | lm loss value: 6.000000E+00 | lm loss PPL: "
      "4.034288E+02 | sop loss value: 2.500000E+01 | sop loss PPL: 4.851652E+08 | ";
  const std::string dashes(156, '-');
  ASSERT_EQ(text.size() + 1, dashes.size());
  EXPECT_EQ(megatron_validation_block("iteration 1000", {{"lm loss", 6.0}, {"sop loss", 25.0}}),
            dashes + "\n" + text + "\n" + dashes + "\n");
}

TEST(MegatronLog, ScalarNamesAreMegatrons) {
  EXPECT_EQ(tb::kLearningRate, "learning-rate");
  EXPECT_EQ(tb::kBatchSize, "batch-size");
  EXPECT_EQ(tb::kLossScale, "loss-scale");
  EXPECT_EQ(tb::kGradNorm, "grad-norm");
  EXPECT_EQ(tb::vs_samples(tb::kLmLoss), "lm loss vs samples");
  EXPECT_EQ(tb::validation(tb::kSopLoss), tb::kSopLossValidation);
  EXPECT_EQ(tb::validation_ppl(tb::kLmLoss), "lm loss validation ppl");
}

TEST(MegatronLog, TrainAndValidationScalarsReadBackWithMegatronsNames) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_megatron_tb_" + std::to_string(getpid()));
  fs::remove_all(dir);
  {
    TensorBoardWriter w(dir);
    write_megatron_train_scalars(w, sample_log());
    write_megatron_validation_scalars(w, {{"lm loss", 6.0}}, 1000, 32000, true);
  }
  const std::string cmd = "python3 " + std::string(KILN_SOURCE_DIR) + "/tools/tb_read.py '" +
                          dir.string() + "' > '" + (dir / "out.txt").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string expected =
      "learning-rate 100 9.999999747378752e-05\n"
      "learning-rate vs samples 3200 9.999999747378752e-05\n"
      "batch-size 100 32.0\n"
      "batch-size vs samples 3200 32.0\n"
      "lm loss 100 7.1234564781188965\n"
      "lm loss vs samples 3200 7.1234564781188965\n"
      "sop loss 100 0.6931471824645996\n"
      "sop loss vs samples 3200 0.6931471824645996\n"
      "loss-scale 100 1.0\n"
      "loss-scale vs samples 3200 1.0\n"
      "grad-norm 100 1.2345000505447388\n"
      "grad-norm vs samples 3200 1.2345000505447388\n"
      "lm loss validation 1000 6.0\n"
      "lm loss validation vs samples 32000 6.0\n"
      "lm loss validation ppl 1000 403.4288024902344\n"
      "lm loss validation ppl vs samples 32000 403.4288024902344\n";
  EXPECT_EQ(read_file(dir / "out.txt"), expected);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::log
