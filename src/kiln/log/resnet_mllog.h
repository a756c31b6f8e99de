// log/resnet_mllog.h — the MLPerf ResNet-50 (training ruleset 4.0.0, LARS) event sequence:
//
//   log_resnet_init_start(ml, info)  log_submission_preamble (log/submission.h) with "resnet":
//                                    cache_clear; init_start; submission_*; seed;
//                                    global_batch_size, gradient_accumulation_steps, train_samples,
//                                    eval_samples, opt_name "lars", lars_opt_base_learning_rate,
//                                    lars_opt_end_learning_rate (1e-4), lars_opt_learning_rate_decay_poly_power
//                                    (2), lars_opt_learning_rate_decay_steps, lars_epsilon (0),
//                                    lars_opt_learning_rate_warmup_epochs, lars_opt_momentum,
//                                    lars_opt_weight_decay (1e-4 * 2^N)
//   log_run_start(ml)           init_stop; run_start (log/submission.h)
//   per epoch e (numbered from 1):   epoch_start {epoch_num}; epoch_stop {epoch_num};
//                                    when evaluating: eval_start, eval_stop, eval_accuracy {epoch_num}
//   log_run_stop(ml, success)   run_stop {status}
// Two processes (scripts/run_and_time_resnet.sh): the init phase logs log_resnet_submission (up
// to seed) and init_stop; the run phase appends run_start, then log_resnet_hyperparameters.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/log/mllog.h"
#include "kiln/log/submission.h"

namespace kiln::log {

struct ResNetRunInfo {
  int64_t seed = 0;
  int64_t global_batch_size = 0;
  int64_t gradient_accumulation_steps = 1;
  int64_t train_samples = 0;
  int64_t eval_samples = 0;
  double base_learning_rate = 0;
  double end_learning_rate = 1e-4;
  double decay_poly_power = 2;
  int64_t decay_steps = 0;
  double epsilon = 0;
  double warmup_epochs = 0;
  double momentum = 0.9;
  double weight_decay = 5e-5;
  SubmissionInfo submission;
};

inline constexpr double kResNetTargetAccuracy = 0.759;

void log_resnet_init_start(MlLogger& ml, const ResNetRunInfo& info);
void log_resnet_submission(MlLogger& ml, const ResNetRunInfo& info);
void log_resnet_hyperparameters(MlLogger& ml, const ResNetRunInfo& info);
void log_resnet_epoch_start(MlLogger& ml, int64_t epoch);
void log_resnet_epoch_stop(MlLogger& ml, int64_t epoch);
void log_resnet_eval(MlLogger& ml, int64_t epoch, double top1);  // eval_start, eval_stop, eval_accuracy

}  // namespace kiln::log
