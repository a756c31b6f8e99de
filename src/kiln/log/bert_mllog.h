// log/bert_mllog.h — the MLPerf BERT (training ruleset 5.0.0) event sequence, so a trainer logs a
// compliant result_bert_<seed>.log by calling these in order:
//
//   log_bert_init_start(ml, info)    log_submission_preamble (log/submission.h) with "bert":
//                                    cache_clear, init_start, submission_*, seed (int, from one call
//                                    site in bert_mllog.cc, as the seed checker wants);
//                                    global_batch_size, gradient_accumulation_steps, max_sequence_length,
//                                    max_predictions_per_seq, opt_name, opt_base_learning_rate,
//                                    opt_lamb_epsilon, opt_lamb_learning_rate_decay_poly_power,
//                                    opt_learning_rate_training_steps, opt_learning_rate_warmup_steps,
//                                    num_warmup_steps, start_warmup_step, opt_lamb_beta_1,
//                                    opt_lamb_beta_2, opt_lamb_weight_decay_rate, train_samples,
//                                    eval_samples
//   ... untimed init (model build, compile, warm-up), < 30 min in the closed division ...
//   log_run_start(ml)           init_stop; run_start (the clock starts; no data touched before)
//   log_bert_preamble(ml, info)      = both of the above with no init work between them
//
//   Two processes (scripts/run_and_time_bert.sh): the init phase logs log_bert_submission
//   (the preamble up to seed) and init_stop; the run phase, appending to the same log, logs
//   run_start first, then log_bert_hyperparameters (the rest of log_bert_init_start).
//
//   per block of training samples (BERT's "epoch" is the number of training samples seen):
//   log_bert_block_start(ml, samples_seen, block_samples)   block_start {first_epoch_num, epoch_count}
//     log_bert_eval_start(ml, samples_seen)                  eval_start {epoch_num}
//     log_bert_eval_stop(ml, samples_seen, accuracy)         eval_stop {epoch_num}; eval_accuracy {epoch_num}
//   log_bert_block_stop(ml, first_samples)                   block_stop {first_epoch_num}
//   log_run_stop(ml, success)                           run_stop {status: success | aborted}
#pragma once
#include <cstdint>
#include <string>

#include "kiln/log/mllog.h"
#include "kiln/log/submission.h"

namespace kiln::log {

struct BertRunInfo {
  int64_t seed = 0;
  int64_t global_batch_size = 0;
  int64_t gradient_accumulation_steps = 1;
  int64_t max_sequence_length = 512;
  int64_t max_predictions_per_seq = 76;
  std::string opt_name = "lamb";
  double opt_base_learning_rate = 0.0;
  double opt_lamb_epsilon = 1e-6;
  double opt_lamb_learning_rate_decay_poly_power = 1.0;
  int64_t opt_learning_rate_training_steps = 0;
  int64_t opt_learning_rate_warmup_steps = 0;  // also logged as num_warmup_steps
  int64_t start_warmup_step = 0;
  double opt_lamb_beta_1 = 0.9;
  double opt_lamb_beta_2 = 0.999;
  double opt_lamb_weight_decay_rate = 0.01;
  int64_t train_samples = 0;  // GBS · training steps, as tinygrad logs it
  int64_t eval_samples = 10000;
  SubmissionInfo submission;
};

// Target masked-LM accuracy of the closed division.
inline constexpr double kBertTargetAccuracy = 0.720;

// Throws kiln::Error naming the first BERT field the checker would reject (log_bert_init_start
// checks the submission fields too, before anything is logged).
void validate(const BertRunInfo& info);

void log_bert_init_start(MlLogger& ml, const BertRunInfo& info);
void log_bert_submission(MlLogger& ml, const BertRunInfo& info);
void log_bert_hyperparameters(MlLogger& ml, const BertRunInfo& info);
void log_bert_preamble(MlLogger& ml, const BertRunInfo& info);
void log_bert_block_start(MlLogger& ml, int64_t samples_seen, int64_t block_samples);
void log_bert_eval_start(MlLogger& ml, int64_t samples_seen);
void log_bert_eval_stop(MlLogger& ml, int64_t samples_seen, double accuracy);
void log_bert_block_stop(MlLogger& ml, int64_t first_samples);

}  // namespace kiln::log
