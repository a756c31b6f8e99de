// train/config/resnet_config.h — everything `kiln train resnet` can be told (tinygrad's env names).
#pragma once
#include <cstdint>
#include <string>

#include "kiln/train/config/config_registry.h"
#include "kiln/train/config/ddp_config.h"
#include "kiln/train/config/mlperf_phase.h"
#include "kiln/train/config/precision_config.h"
#include "kiln/train/config/resume_flags.h"

namespace kiln::train {

struct ResNetTrainConfig {
  // [model]
  std::string arch = "resnet50";  // resnet18 | resnet34 | resnet50 | resnet101
  int64_t num_classes = 0;        // 0: the number of class folders in the data
  int64_t width = 64;             // channels of the first stage (64 in the paper)
  bool small_images = false;      // 3x3 stride-1 stem without max-pool (28x28 / 32x32 inputs)
  bool zero_init_residual = false;
  std::string init = "torchvision";  // torchvision | mlperf (tinygrad's MLPerf init)
  // [data]
  std::string data_dir;           // train/<class>/*.JPEG and val/<class>/*.JPEG (or val/ + labels)
  std::string val_labels;         // flat val/: ILSVRC2012 ground-truth style labels file
  int64_t image_size = 224;
  int64_t eval_resize = 256;
  bool normalize_std = false;
  bool skip_bad_images = false;
  int64_t workers = 0;            // decode threads (0: cores)
  bool fake_data = false;
  // [train]
  int64_t batch_size = 0;         // 0: 104 x GPUS (tinygrad)
  int64_t epochs = 37;
  int64_t benchmark = 0;
  int64_t exit_interval = 0;      // >0: stop after this step (the schedule still spans the epochs)
  int64_t seed = 42;
  int64_t threads = 0;
  PrecisionConfig precision;      // --bf16, --fp16, DEFAULT_FLOAT, loss scaling
  // [parallel] data parallel over the devices (GPUS, mpirun -np N); the batch is split across them
  int64_t devices = 0;            // 0: the processes started (train/config/devices_config.h)
  bool sync_bn = false;           // BatchNorm statistics over every rank's images (SYNCBN=1)
  bool distributed_optimizer = false;  // ZeRO-1 over the data-parallel ranks
  DdpConfig ddp;                  // --overlap-grad-reduce, --ddp-bucket-size
  double dist_timeout = 600;      // seconds a collective waits for the other ranks
  double save_timeout = 3600;     // the same across a checkpoint save or an evaluation
  MlperfPhaseConfig mlperf;       // --mlperf-phase, INITMLPERF, RUNMLPERF
  // [optim]
  double lr = 0;                  // 0: 7.2 * batch / 1536 (MLPerf LR scaling rule)
  double end_lr = 1e-4;
  double warmup_epochs = 2;
  double momentum = 0.9;
  double weight_decay = 2e-4;     // LARS decay on conv and fc weights (1e-4 * 2^N)
  double label_smoothing = 0.1;
  // [eval]
  int64_t eval_batch_size = 0;    // 0: the training batch
  // tinygrad's schedule: after epoch e (1-based) when (e - eval_start_epoch) % eval_freq == 0, and
  // after every epoch from eval_every_epoch_from on (0: never), and after the last epoch.
  int64_t eval_start_epoch = 0;
  int64_t eval_freq = 1;
  int64_t eval_every_epoch_from = 33;
  double target = 0.759;
  // [run]
  int64_t log_interval = 10;
  std::string output_dir = ".";
  std::string save_dir;
  int64_t save_interval = 1;      // epochs between checkpoints
  int64_t keep_checkpoints = 5;
  std::string load_dir;
  ResumeFlags resume;             // --no-load-optim, --no-load-rng, --finetune
  bool dry_run = false;           // print parameters, memory and FLOPs per step, then exit
  bool dry_run_json = false;      // with device_model: only the expected step, as JSON (format_step_json)
  std::string device_model;      // with dry_run: also the expected step on this device (train/dry_run/device_model.h)
  std::string submission_org = "kiln";
  std::string submission_platform = "kiln-cpu";
  bool is_rank0 = true;           // console, logs and checkpoints are written by rank 0 only
  bool progress = false;          // progress line with ETA between console lines (a terminal)
};

void register_resnet_config(ConfigRegistry& registry, ResNetTrainConfig& config);
void finalize_resnet_config(ResNetTrainConfig& config, const ConfigRegistry& registry);

}  // namespace kiln::train
