// train/bert_config.h — everything `kiln train bert` can be told, with its resolution rules.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/train/config_registry.h"

namespace kiln::train {

struct BertTrainConfig {
  // [model]
  int64_t vocab_size = 30522, hidden_size = 1024, num_layers = 24, num_heads = 16;
  int64_t intermediate_size = 4096, max_position = 512, type_vocab = 2;
  double hidden_dropout = 0.1, attention_dropout = 0.1;
  bool pre_ln = false;
  bool disable_dropout = false;
  // [data]
  std::string data_dir;       // output of `kiln prepare bert`: train/ and eval.kbs
  std::string vocab_file;     // optional: checked against vocab_size
  bool fake_data = false;     // generated batches (BENCHMARK runs)
  int64_t seq_length = 0;     // 0: taken from the data; required with fake data
  int64_t max_predictions = 76;
  // [train]
  int64_t global_batch_size = 0;  // 0: tinygrad's default (8)
  int64_t micro_batch_size = 0;   // 0: the global batch (no accumulation)
  int64_t train_steps = 0;        // 0: 3,600,000 / global batch (tinygrad)
  int64_t benchmark = 0;          // >0: run this many steps, print the estimated time to train
  int64_t exit_interval = 0;      // >0: stop after this step (the schedule still spans train_steps)
  int64_t seed = 12345;
  int64_t threads = 0;            // 0: all cores (OpenMP default)
  std::string matmul_dtype = "f32";
  // [optim]
  std::string optimizer = "lamb";  // lamb | adamw
  double lr = 0;                   // 0: 0.000175 * sqrt(global batch / 96) (tinygrad)
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6, weight_decay = 0.01, clip_grad = 1.0;
  std::string lr_decay_style = "poly";  // poly (MLPerf) | linear | cosine
  int64_t warmup_steps = 1;
  double warmup_fraction = 0;       // > 0 overrides warmup_steps
  double poly_power = 1.0;
  double min_lr = 0;
  // [eval]
  int64_t eval_batch_size = 0;   // 0: the global batch
  int64_t eval_interval = 0;     // 0: MLPerf's interval (0.05 * (230.23 * GBS + 3e6), floored
                                 //    to 25,000 samples) in steps
  int64_t eval_iters = 0;        // 0: enough batches to cover eval_samples
  int64_t eval_samples = 10000;  // capped at the eval set size
  double target = 0.72;          // masked-LM accuracy that stops the run
  bool eval_at_start = false;    // also evaluate before the first step (not logged for MLPerf)
  // [run]
  int64_t log_interval = 1;
  std::string output_dir = ".";  // where result_bert_<seed>.log goes
  std::string save_dir;          // checkpoints; empty: none
  int64_t save_interval = 1000;
  int64_t keep_checkpoints = 5;
  std::string load_dir;          // resume from the newest checkpoint here
  std::string submission_platform = "kiln-cpu";

  int64_t accumulation_steps() const { return global_batch_size / micro_batch_size; }
};

// Binds every field to its TOML key, tinygrad environment name and Megatron flag.
void register_bert_config(ConfigRegistry& registry, BertTrainConfig& config);

// Fills derived defaults (LR, steps, eval schedule) and checks consistency; throws kiln::Error
// naming the key at fault.
void finalize_bert_config(BertTrainConfig& config, const ConfigRegistry& registry);

}  // namespace kiln::train
