// `kiln train resnet`'s derived settings against tinygrad's formulas (examples/mlperf/
// model_train.py, train_resnet) and its evaluation schedule.
#include <gtest/gtest.h>

#include <vector>

#include "kiln/train/config/resnet_config.h"
#include "kiln/train/loop.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/error_of.h"
#include "tests/testing/scoped_env.h"

namespace kiln::train {
namespace {
using testing::ScopedEnv;

ResNetTrainConfig resnet_config(std::vector<std::string> flags) {
  ResNetTrainConfig c;
  ConfigRegistry registry;
  register_resnet_config(registry, c);
  registry.apply_env();
  testing::apply_flag_list(registry, testing::concat({"--fake-data"}, flags));
  finalize_resnet_config(c, registry);
  return c;
}

// tinygrad: BS = 104 x GPUS, EVAL_BS = BS, LR = 7.2 x BS / 1536, WARMUP_EPOCHS = 2, EPOCHS = 37.
TEST(ResNetConfig, DefaultsFollowTinygradsFormulas) {
  const ResNetTrainConfig one = resnet_config({});
  EXPECT_EQ(one.devices, 1);
  EXPECT_EQ(one.batch_size, 104);
  EXPECT_EQ(one.eval_batch_size, 104);
  EXPECT_DOUBLE_EQ(one.lr, 7.2 * 104 / 1536);
  EXPECT_DOUBLE_EQ(one.warmup_epochs, 2.0);
  EXPECT_EQ(one.epochs, 37);
  EXPECT_EQ(one.eval_start_epoch, 0);
  EXPECT_EQ(one.eval_freq, 1);
  EXPECT_EQ(one.eval_every_epoch_from, 33);

  ScopedEnv gpus("GPUS", "6");
  const ResNetTrainConfig six = resnet_config({"--dry-run"});
  EXPECT_EQ(six.devices, 6);
  EXPECT_EQ(six.batch_size, 624);
  EXPECT_EQ(six.eval_batch_size, 624);
  EXPECT_DOUBLE_EQ(six.lr, 7.2 * 624 / 1536);
  ScopedEnv bs("BS", "1536");
  const ResNetTrainConfig submission = resnet_config({"--dry-run"});
  EXPECT_DOUBLE_EQ(submission.lr, 7.2);
  EXPECT_EQ(testing::error_of([] { resnet_config({}); }),
            "6 devices (GPUS, --devices or parallel.devices): kiln runs one process per device; start 6 with mpirun -np 6 (this is 1 process)");
}

// tinygrad's v4.0 tinybox green run_and_time.sh: GPUS=6 BS=1536 EVAL_BS=192 DEFAULT_FLOAT=HALF
// EVAL_START_EPOCH=3 EVAL_FREQ=4, the rest tinygrad's defaults.
TEST(ResNetConfig, TheTinyboxGreenPresetIsTinygradsSubmission) {
  const ResNetTrainConfig c = testing::config_from_preset<ResNetTrainConfig>(
      register_resnet_config, finalize_resnet_config, KILN_SOURCE_DIR "/configs/resnet50-tinybox-green.toml",
      {"--dry-run"});
  EXPECT_EQ(c.devices, 6);
  EXPECT_EQ(c.batch_size, 1536);
  EXPECT_EQ(c.eval_batch_size, 192);
  EXPECT_EQ(c.precision.dtype, DType::f16);
  EXPECT_EQ(c.precision.scaler.scale, 256.0);
  EXPECT_EQ(c.eval_start_epoch, 3);
  EXPECT_EQ(c.eval_freq, 4);
  EXPECT_EQ(c.eval_every_epoch_from, 33);
  EXPECT_EQ(c.epochs, 37);
  EXPECT_DOUBLE_EQ(c.lr, 7.2);
  EXPECT_DOUBLE_EQ(c.warmup_epochs, 2.0);
  EXPECT_DOUBLE_EQ(c.weight_decay, 2e-4);
  EXPECT_EQ(c.arch, "resnet50");
  EXPECT_EQ(c.init, "mlperf");
}

// The epochs (1-based) after which `cadence` evaluates in a run of `total` epochs.
std::vector<int64_t> eval_epochs(const Cadence& cadence, int64_t total) {
  std::vector<int64_t> out;
  for (int64_t e = 1; e <= total; ++e)
    if (cadence.evaluates_after_epoch(e, total)) out.push_back(e);
  return out;
}

// tinygrad evaluates after epoch e + 1 when (e + 1 - EVAL_START_EPOCH) % EVAL_FREQ == 0 or
// e + 1 >= 33; its submission's EVAL_START_EPOCH=3 EVAL_FREQ=4 gives 3, 7, ..., 31, then 33-37.
TEST(ResNetConfig, EvaluationScheduleIsTinygrads) {
  Cadence submission;
  submission.eval_start_epoch = 3;
  submission.eval_every = 4;
  submission.eval_every_epoch_from = resnet_config({}).eval_every_epoch_from;
  EXPECT_EQ(eval_epochs(submission, 37),
            (std::vector<int64_t>{3, 7, 11, 15, 19, 23, 27, 31, 33, 34, 35, 36, 37}));
  Cadence every;  // tinygrad's defaults 0 / 1
  every.eval_every_epoch_from = 33;
  EXPECT_EQ(eval_epochs(every, 5), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  // A short run evaluates after its last epoch too; without the tail, only on the schedule.
  Cadence short_run;
  short_run.eval_start_epoch = 3;
  short_run.eval_every = 4;
  EXPECT_EQ(eval_epochs(short_run, 9), (std::vector<int64_t>{3, 7, 9}));
  // Python's % and C++'s agree on multiples before the start epoch: start 5, every 4 includes 1.
  Cadence early;
  early.eval_start_epoch = 5;
  early.eval_every = 4;
  EXPECT_EQ(eval_epochs(early, 6), (std::vector<int64_t>{1, 5, 6}));
}

}  // namespace
}  // namespace kiln::train
