#include "kiln/log/resnet_mllog.h"

#include "kiln/core/error.h"
#include "kiln/log/mllog_keys.h"

namespace kiln::log {

void log_resnet_submission(MlLogger& ml, const ResNetRunInfo& info) {
  KILN_CHECK(info.global_batch_size > 0, "mllog ResNet run: global_batch_size must be positive");
  log_submission_preamble(ml, "resnet", info.submission, info.seed);
}

void log_resnet_hyperparameters(MlLogger& ml, const ResNetRunInfo& info) {
  KILN_CHECK(info.global_batch_size > 0, "mllog ResNet run: global_batch_size must be positive");
  ml.event(key::kGlobalBatchSize, info.global_batch_size);
  ml.event(key::kGradientAccumulationSteps, info.gradient_accumulation_steps);
  ml.event(key::kTrainSamples, info.train_samples);
  ml.event(key::kEvalSamples, info.eval_samples);
  ml.event(key::kOptName, "lars");
  ml.event(key::kLarsOptBaseLearningRate, info.base_learning_rate);
  ml.event(key::kLarsOptEndLearningRate, info.end_learning_rate);
  ml.event(key::kLarsOptLearningRateDecayPolyPower, info.decay_poly_power);
  ml.event(key::kLarsOptLearningRateDecaySteps, info.decay_steps);
  ml.event(key::kLarsEpsilon, info.epsilon);
  ml.event(key::kLarsOptLearningRateWarmupEpochs, info.warmup_epochs);
  ml.event(key::kLarsOptMomentum, info.momentum);
  ml.event(key::kLarsOptWeightDecay, info.weight_decay);
}

void log_resnet_init_start(MlLogger& ml, const ResNetRunInfo& info) {
  log_resnet_submission(ml, info);
  log_resnet_hyperparameters(ml, info);
}

void log_resnet_epoch_start(MlLogger& ml, int64_t epoch) {
  ml.start(key::kEpochStart, nullptr, {{"epoch_num", epoch}});
}

void log_resnet_epoch_stop(MlLogger& ml, int64_t epoch) {
  ml.end(key::kEpochStop, nullptr, {{"epoch_num", epoch}});
}

void log_resnet_eval(MlLogger& ml, int64_t epoch, double top1) {
  ml.start(key::kEvalStart, nullptr, {{"epoch_num", epoch}});
  ml.end(key::kEvalStop, nullptr, {{"epoch_num", epoch}});
  ml.event(key::kEvalAccuracy, top1, {{"epoch_num", epoch}});
}

}  // namespace kiln::log
