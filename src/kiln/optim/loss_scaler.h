// optim/loss_scaler.h — loss scaling for fp16 training: the loss gradient is multiplied by
// scale() before backward, the gradients divided by it before the norm and the update.
//
// Static (tinygrad's LOSS_SCALER, Megatron's --loss-scale X): the scale never changes; a
// non-finite gradient still skips the step.
// Dynamic (Megatron's DynamicGradScaler, specs/megatron-bert.md 4.3): starts at
// initial_scale (2^32); on a step with a non-finite gradient: growth tracker = 0, hysteresis
// tracker -= 1, and when it reaches 0, scale = max(scale * 0.5, min_scale); on a clean step:
// growth tracker += 1, and when it reaches `window` (1000): growth tracker = 0, hysteresis
// tracker = hysteresis, scale *= 2. (The first overflows only spend the hysteresis; after that
// every consecutive overflow halves the scale.)
// None (f32, bf16): scale 1, never changes.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::optim {

struct LossScalerConfig {
  enum class Kind { none, constant, dynamic };
  Kind kind = Kind::none;
  double scale = 1.0;               // constant: the scale; dynamic: the initial scale
  double min_scale = 1.0;           // dynamic only
  int64_t window = 1000;            // clean steps between doublings (--loss-scale-window)
  int64_t hysteresis = 2;           // overflows tolerated before halving (--hysteresis)
  double growth_factor = 2.0, backoff_factor = 0.5;
};

class LossScaler {
 public:
  // Throws kiln::Error for a non-positive scale, min_scale > scale, window or hysteresis < 1.
  explicit LossScaler(LossScalerConfig config = {});

  double scale() const { return scale_; }
  bool enabled() const { return config_.kind != LossScalerConfig::Kind::none; }
  bool dynamic() const { return config_.kind == LossScalerConfig::Kind::dynamic; }
  // True when a dynamic scaler can still lower its scale (it is above min_scale).
  bool can_lower() const { return dynamic() && scale_ > config_.min_scale; }
  const LossScalerConfig& config() const { return config_; }

  // After each step: `found_non_finite` = the unscaled gradients (or the loss) held inf/NaN.
  void update(bool found_non_finite);

  // Saved in checkpoints as Megatron does: scale, growth tracker, hysteresis tracker.
  nlohmann::json state() const;
  // Restores state(); a checkpoint without it (older, or another precision) leaves the scaler
  // as constructed. Throws kiln::Error for malformed state.
  void load_state(const nlohmann::json& state);

  // "dynamic (initial 4294967296, min 1, window 1000, hysteresis 2)", "static 2048", "none".
  std::string describe() const;

 private:
  LossScalerConfig config_;
  double scale_;
  int64_t growth_tracker_ = 0, hysteresis_tracker_;
};

}  // namespace kiln::optim
