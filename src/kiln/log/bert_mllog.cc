#include "kiln/log/bert_mllog.h"

#include "kiln/core/error.h"
#include "kiln/log/mllog_keys.h"

namespace kiln::log {

void validate(const BertRunInfo& info) {
  KILN_CHECK(info.seed >= 0, "mllog BERT run: seed {} must not be negative", info.seed);
  KILN_CHECK(info.global_batch_size > 0, "mllog BERT run: global_batch_size {} must be positive",
             info.global_batch_size);
  KILN_CHECK(info.gradient_accumulation_steps > 0,
             "mllog BERT run: gradient_accumulation_steps {} must be positive", info.gradient_accumulation_steps);
  KILN_CHECK(info.opt_learning_rate_training_steps > 0,
             "mllog BERT run: opt_learning_rate_training_steps {} must be positive",
             info.opt_learning_rate_training_steps);
  KILN_CHECK(info.train_samples > 0 && info.eval_samples > 0,
             "mllog BERT run: train_samples {} and eval_samples {} must be positive", info.train_samples,
             info.eval_samples);
}

void log_bert_submission(MlLogger& ml, const BertRunInfo& info) {
  validate(info);
  log_submission_preamble(ml, "bert", info.submission, info.seed);
}

void log_bert_hyperparameters(MlLogger& ml, const BertRunInfo& info) {
  validate(info);
  ml.event(key::kGlobalBatchSize, info.global_batch_size);
  ml.event(key::kGradientAccumulationSteps, info.gradient_accumulation_steps);
  ml.event(key::kMaxSequenceLength, info.max_sequence_length);
  ml.event(key::kMaxPredictionsPerSeq, info.max_predictions_per_seq);
  ml.event(key::kOptName, info.opt_name);
  ml.event(key::kOptBaseLearningRate, info.opt_base_learning_rate);
  ml.event(key::kOptLambEpsilon, info.opt_lamb_epsilon);
  ml.event(key::kOptLambLearningRateDecayPolyPower, info.opt_lamb_learning_rate_decay_poly_power);
  ml.event(key::kOptLearningRateTrainingSteps, info.opt_learning_rate_training_steps);
  ml.event(key::kOptLearningRateWarmupSteps, info.opt_learning_rate_warmup_steps);
  ml.event(key::kNumWarmupSteps, info.opt_learning_rate_warmup_steps);
  ml.event(key::kStartWarmupStep, info.start_warmup_step);
  ml.event(key::kOptLambBeta1, info.opt_lamb_beta_1);
  ml.event(key::kOptLambBeta2, info.opt_lamb_beta_2);
  ml.event(key::kOptLambWeightDecayRate, info.opt_lamb_weight_decay_rate);
  ml.event(key::kTrainSamples, info.train_samples);
  ml.event(key::kEvalSamples, info.eval_samples);
}

void log_bert_init_start(MlLogger& ml, const BertRunInfo& info) {
  log_bert_submission(ml, info);
  log_bert_hyperparameters(ml, info);
}

void log_bert_preamble(MlLogger& ml, const BertRunInfo& info) {
  log_bert_init_start(ml, info);
  log_run_start(ml);
}

void log_bert_block_start(MlLogger& ml, int64_t samples_seen, int64_t block_samples) {
  KILN_CHECK(block_samples > 0, "mllog block_start: block of {} samples must be positive", block_samples);
  ml.start(key::kBlockStart, nullptr, {{"first_epoch_num", samples_seen}, {"epoch_count", block_samples}});
}

void log_bert_eval_start(MlLogger& ml, int64_t samples_seen) {
  ml.start(key::kEvalStart, nullptr, {{"epoch_num", samples_seen}});
}

void log_bert_eval_stop(MlLogger& ml, int64_t samples_seen, double accuracy) {
  ml.end(key::kEvalStop, nullptr, {{"epoch_num", samples_seen}});
  ml.event(key::kEvalAccuracy, accuracy, {{"epoch_num", samples_seen}});
}

void log_bert_block_stop(MlLogger& ml, int64_t first_samples) {
  ml.end(key::kBlockStop, nullptr, {{"first_epoch_num", first_samples}});
}

}  // namespace kiln::log
