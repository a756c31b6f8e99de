#include "kiln/train/config/precision_config.h"

#include <algorithm>
#include <cctype>

#include "kiln/backend/devices.h"
#include "kiln/core/error.h"
#include "kiln/dist/world.h"
#include "kiln/nn/params.h"

namespace kiln::train {

void register_precision_config(ConfigRegistry& r, PrecisionConfig& c) {
  r.add_string("train.device", &c.device, "", {"--device"}, "where the step runs: cpu, cuda, cuda:N, or sim (the CPU kernels behind a GPU's data path)");
  r.add_string("train.precision", &c.precision, "DEFAULT_FLOAT", {},
               "compute dtype: f32, bf16 or f16 (FLOAT32, BFLOAT16, HALF)");
  r.add_bool("train.bf16", &c.bf16, "", {"--bf16"}, "bf16 activations and weight copy, f32 master weights");
  r.add_bool("train.fp16", &c.fp16, "", {"--fp16"},
             "f16 activations and weight copy, f32 master weights, dynamic loss scaling");
  r.add_float("optim.loss_scale", &c.loss_scale, "LOSS_SCALER", {"--loss-scale"},
              "constant loss scale (0: dynamic with --fp16, none with f32/bf16)");
  r.add_float("optim.initial_loss_scale", &c.initial_loss_scale, "", {"--initial-loss-scale"},
              "dynamic loss scale: initial value");
  r.add_float("optim.min_loss_scale", &c.min_loss_scale, "", {"--min-loss-scale"},
              "dynamic loss scale: lowest value");
  r.add_int("optim.loss_scale_window", &c.loss_scale_window, "", {"--loss-scale-window"},
            "dynamic loss scale: clean steps before it doubles");
  r.add_int("optim.hysteresis", &c.hysteresis, "", {"--hysteresis"},
            "dynamic loss scale: overflows tolerated before it halves");
  r.add_int("train.max_skipped_steps", &c.max_skipped_steps, "", {"--max-skipped-steps"},
            "stop after N consecutive steps skipped for non-finite values (0: never)");
}

void finalize_precision_config(PrecisionConfig& c, const ConfigRegistry& r, double tinygrad_fp16_scale) {
  c.run_device = parse_device(c.device, "config: train.device (--device)", dist::world().local_rank());
  device_context(c.run_device);  // a one-line error without the backend or the device
  std::string p = c.precision;
  std::transform(p.begin(), p.end(), p.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (p == "f32" || p == "fp32" || p == "float32" || p == "float") c.dtype = DType::f32;
  else if (p == "bf16" || p == "bfloat16") c.dtype = DType::bf16;
  else if (p == "f16" || p == "fp16" || p == "half" || p == "float16") c.dtype = DType::f16;
  else
    throw Error("config: train.precision (DEFAULT_FLOAT) must be f32, bf16 or f16 (FLOAT32, BFLOAT16, "
                "HALF), got '{}'", c.precision);
  if (c.bf16 && c.fp16) throw Error("config: --bf16 and --fp16 exclude each other");
  if (c.bf16) c.dtype = DType::bf16;
  if (c.fp16) c.dtype = DType::f16;
  c.precision = std::string(dtype_name(c.dtype));

  if (c.loss_scale < 0) throw Error("config: optim.loss_scale must be positive, got {}", c.loss_scale);
  if (c.max_skipped_steps < 0)
    throw Error("config: train.max_skipped_steps must be >= 0, got {}", c.max_skipped_steps);
  const bool dynamic_asked = c.fp16 || r.was_set("optim.initial_loss_scale") || r.was_set("optim.min_loss_scale") ||
                             r.was_set("optim.loss_scale_window") || r.was_set("optim.hysteresis");
  optim::LossScalerConfig s;
  if (c.loss_scale > 0) {
    s.kind = optim::LossScalerConfig::Kind::constant;
    s.scale = c.loss_scale;
  } else if (c.dtype == DType::f16 && dynamic_asked) {
    s.kind = optim::LossScalerConfig::Kind::dynamic;
    s.scale = c.initial_loss_scale;
    s.min_scale = c.min_loss_scale;
    s.window = c.loss_scale_window;
    s.hysteresis = c.hysteresis;
  } else if (c.dtype == DType::f16) {
    s.kind = optim::LossScalerConfig::Kind::constant;
    s.scale = tinygrad_fp16_scale;
  }
  optim::LossScaler{s};  // validates, naming the flag at fault
  c.scaler = s;
}

bool PrecisionConfig::splits_master() const { return ParamStore::splits_master(dtype, run_device); }

}  // namespace kiln::train
