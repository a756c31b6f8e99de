// train/config/precision_config.h — the device and precision of a run and its loss scaling, shared by
// every recipe.
//
// Device: --device cpu|cuda|cuda:N (TOML train.device). Training steps run on the CPU so far;
// cuda is checked (backend compiled in, device present) and then refused with a one-line error.
// Compute dtype (activations and the weights' compute copy; master weights, gradients and
// optimizer state stay f32): `--bf16` / `--fp16` (Megatron), DEFAULT_FLOAT=FLOAT32|BFLOAT16|HALF
// (tinygrad; also f32/bf16/f16), TOML train.precision. --bf16 and --fp16 win over the others.
// Loss scaling:
//   --loss-scale X / LOSS_SCALER=X        a constant scale X, in any precision (Megatron, tinygrad)
//   f16 from --fp16 (or with any of --initial-loss-scale, --min-loss-scale, --loss-scale-window,
//   --hysteresis)                         Megatron's dynamic scaler: 2^32, min 1, window 1000,
//                                         hysteresis 2
//   f16 from DEFAULT_FLOAT=HALF / TOML    tinygrad's constant LOSS_SCALER default (BERT 2^11,
//                                         ResNet 256)
//   f32, bf16                             none
// --max-skipped-steps N (10): N consecutive steps skipped for a non-finite loss or gradient norm,
// that a dynamic scaler cannot fix by lowering its scale, stop the run; 0 never stops.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/core/device.h"
#include "kiln/core/dtype.h"
#include "kiln/optim/loss_scaler.h"
#include "kiln/train/config/config_registry.h"

namespace kiln::train {

struct PrecisionConfig {
  std::string device = "cpu";     // cpu | cuda | cuda:N
  std::string precision = "f32";  // f32 | bf16 | f16 (after finalize); DEFAULT_FLOAT names accepted
  bool bf16 = false, fp16 = false;
  double loss_scale = 0;          // > 0: constant scale
  double initial_loss_scale = 4294967296.0, min_loss_scale = 1.0;
  int64_t loss_scale_window = 1000, hysteresis = 2;
  int64_t max_skipped_steps = 10;

  // Set by finalize_precision_config.
  Device run_device;
  DType dtype = DType::f32;
  optim::LossScalerConfig scaler;

  // The master weights are split into the bf16 copy and low halves (ParamStore::split_master).
  bool splits_master() const;
};

void register_precision_config(ConfigRegistry& registry, PrecisionConfig& config);
// Resolves dtype and scaler (rules above); `tinygrad_fp16_scale` is the recipe's LOSS_SCALER
// default. Throws kiln::Error naming the key at fault.
void finalize_precision_config(PrecisionConfig& config, const ConfigRegistry& registry,
                               double tinygrad_fp16_scale);

}  // namespace kiln::train
