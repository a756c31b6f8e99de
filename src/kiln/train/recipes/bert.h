// train/recipes/bert.h — `kiln train bert`: MLPerf BERT (and Megatron's BERT) pretraining, a recipe
// of the shared training loop (train/loop.h).
#pragma once
#include <filesystem>
#include <iosfwd>
#include <vector>

#include "kiln/models/bert.h"
#include "kiln/train/config/bert_config.h"
#include "kiln/train/resume.h"

namespace kiln::train {

struct EvalResult {
  double mlm_accuracy = 0;  // micro-average over real masked tokens (the MLPerf metric)
  double mlm_loss = 0;      // mean over eval batches
  double nsp_accuracy = 0;
  double nsp_loss = 0;
  int64_t samples = 0;
};

struct BertRunResult {
  int64_t steps = 0;                 // optimizer steps completed (including resumed ones)
  std::vector<double> losses;        // total loss of each step this process ran (skipped too)
  int64_t skipped_steps = 0;         // skipped for a non-finite loss or gradient norm
  double loss_scale = 1;             // at the end
  std::vector<EvalResult> evals;     // in order
  bool reached_target = false;
  std::filesystem::path log_file;    // result_bert_<seed>.log
  std::filesystem::path checkpoint;  // newest checkpoint written, if any
};

// The model a (finalized) config describes.
models::BertConfig bert_model_config(const BertTrainConfig& config);
// The settings a run resumed from a checkpoint must share with it (train/resume.h).
RunSettings bert_run_settings(const BertTrainConfig& config, int seq_len);

// Runs the whole job described by `config` (already finalized); console lines go to `console`.
BertRunResult train_bert(const BertTrainConfig& config,
                         const std::vector<std::pair<std::string, std::string>>& resolved,
                         std::ostream& console);

}  // namespace kiln::train
