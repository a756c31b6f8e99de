// train/config/bert_config.h — everything `kiln train bert` can be told, with its resolution rules.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/train/config/config_registry.h"
#include "kiln/train/config/ddp_config.h"
#include "kiln/train/config/mlperf_phase.h"
#include "kiln/train/config/precision_config.h"
#include "kiln/train/config/resume_flags.h"

namespace kiln::train {

struct BertTrainConfig {
  // [model]
  int64_t vocab_size = 30522, hidden_size = 1024, num_layers = 24, num_heads = 16;
  int64_t intermediate_size = 4096, max_position = 512, type_vocab = 2;
  double hidden_dropout = 0.1, attention_dropout = 0.1;
  bool pre_ln = false;             // Megatron's layout: pre-LN, final LayerNorm, tanh-GELU MLP
  bool disable_dropout = false;
  bool no_binary_head = false;     // drop the pooler and NSP/SOP head (MLM loss only)
  int64_t make_vocab_size_divisible_by = 1;  // Megatron pads the vocab (128 on the Megatron path)
  double layer_norm_eps = 1e-12;
  std::string attention_backend = "auto";    // auto | local | unfused | fused | flash
  bool recompute_activations = false;  // Megatron's selective recomputation: the attention core
  std::string recompute_granularity;   // "", selective (= recompute_activations) or full
  std::string recompute_method;        // with full: uniform or block
  int64_t recompute_num_layers = 1;    // layers per group (uniform) or recomputed per stage (block)
  // [data]
  std::string data_dir;       // output of `kiln prepare bert`: train/ and eval.kbs
  std::string vocab_file;     // optional: checked against vocab_size
  bool fake_data = false;     // generated batches (BENCHMARK runs)
  int64_t seq_length = 0;     // 0: taken from the data; required with fake data
  int64_t max_predictions = 76;
  std::string data_path;      // Megatron: "P" or "w1 P1 w2 P2 ..." (.bin/.idx prefixes)
  std::string split = "949,50,1";
  double masked_lm_prob = 0.15, short_seq_prob = 0.1;  // Megatron masking
  // [train]
  int64_t global_batch_size = 0;  // 0: tinygrad's default, 11 x GPUS in bf16 / f16, else 8 x GPUS
  int64_t micro_batch_size = 0;   // 0: the global batch over the data-parallel ranks (no accumulation)
  int64_t train_steps = 0;        // 0: 3,600,000 / global batch (tinygrad)
  int64_t benchmark = 0;          // >0: run this many steps, print the estimated time to train
  int64_t exit_interval = 0;      // >0: stop after this step (the schedule still spans train_steps)
  int64_t seed = 12345;
  int64_t threads = 0;            // 0: all cores (OpenMP default)
  std::string matmul_dtype = "f32";  // deprecated: bf16 = --bf16
  PrecisionConfig precision;       // --bf16, --fp16, DEFAULT_FLOAT, loss scaling
  MlperfPhaseConfig mlperf;        // --mlperf-phase, INITMLPERF, RUNMLPERF
  // [parallel] data parallel is the devices (GPUS, mpirun -np N) over TP x PP
  int64_t devices = 0;            // 0: the processes started (train/config/devices_config.h)
  int64_t tensor_parallel = 1, pipeline_parallel = 1;
  int64_t layers_per_virtual_stage = 0;  // interleaved 1F1B: layers of each model chunk (0: off)
  bool sequence_parallel = false;  // Megatron's --sequence-parallel (with tensor parallelism)
  bool distributed_optimizer = false;  // ZeRO-1 over the data-parallel ranks
  DdpConfig ddp;                  // --overlap-grad-reduce, --ddp-bucket-size
  double dist_timeout = 600;       // seconds a collective may wait for the other ranks
  double save_timeout = 3600;     // the same across a checkpoint save or an evaluation
  // [optim]
  std::string optimizer = "lamb";  // lamb | adamw
  double lr = 0;                   // 0: 0.000175 * sqrt(global batch / 96) (tinygrad)
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6, weight_decay = 0.01, clip_grad = 1.0;
  std::string lr_decay_style = "poly";  // poly (MLPerf) | linear | cosine
  int64_t warmup_steps = 1;
  int64_t lr_decay_iters = 0;       // 0: train_steps
  double warmup_fraction = 0;       // > 0 overrides warmup_steps
  double poly_power = 1.0;
  double min_lr = 0;
  // [eval]
  int64_t eval_batch_size = 0;   // 0: tinygrad's 1 x GPUS (one sample per data-parallel rank);
                                 //    the global batch on Megatron's data (--data-path)
  int64_t eval_interval = 0;     // 0: MLPerf's interval (0.05 * (230.23 * GBS + 3e6), floored
                                 //    to 25,000 samples) in steps, rounded down (tinygrad)
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
  ResumeFlags resume;            // --no-load-optim, --no-load-rng, --finetune
  std::string init_checkpoint;   // TF1 checkpoint (dir or prefix) the weights start from
  bool init_random = false;      // the MLPerf run phase without init_checkpoint: random weights
  std::string submission_org = "kiln";
  std::string submission_platform = "kiln-cpu";
  std::string tensorboard_dir;    // Megatron's scalars as TensorBoard event files
  std::string log_format = "auto";  // kiln | megatron | auto (megatron with --data-path)
  bool dry_run = false;           // print parameters, memory and FLOPs per step, then exit
  bool dry_run_json = false;      // with device_model: only the expected step, as JSON (format_step_json)
  std::string device_model;      // with dry_run: also the expected step on this device (train/dry_run/device_model.h)
  bool is_rank0 = true;           // console, logs and checkpoints are written by rank 0 only
  bool progress = false;          // progress line with ETA between console lines (a terminal)

  bool megatron_data() const { return !data_path.empty(); }
  // The embedding rows the model allocates: vocab_size rounded up as Megatron pads it.
  // Padded to a multiple of make_vocab_size_divisible_by x the tensor-parallel size (Megatron).
  int64_t padded_vocab_size() const {
    const int64_t d = make_vocab_size_divisible_by * tensor_parallel;
    return (vocab_size + d - 1) / d * d;
  }

  int64_t data_parallel() const { return devices / (tensor_parallel * pipeline_parallel); }
  // Model chunks per pipeline stage: 1, or V of the interleaved schedule.
  int64_t virtual_stages() const {
    return layers_per_virtual_stage ? num_layers / (pipeline_parallel * layers_per_virtual_stage) : 1;
  }
  // Micro-batches each data-parallel rank runs per step.
  int64_t accumulation_steps() const { return global_batch_size / (micro_batch_size * data_parallel()); }
};

// Binds every field to its TOML key, tinygrad environment name and Megatron flag.
void register_bert_config(ConfigRegistry& registry, BertTrainConfig& config);

// Fills derived defaults (LR, steps, eval schedule) and checks consistency; throws kiln::Error
// naming the key at fault.
void finalize_bert_config(BertTrainConfig& config, const ConfigRegistry& registry);

}  // namespace kiln::train
