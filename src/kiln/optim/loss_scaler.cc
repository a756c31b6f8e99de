#include "kiln/optim/loss_scaler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kiln/core/error.h"

namespace kiln::optim {

LossScaler::LossScaler(LossScalerConfig config)
    : config_(config), scale_(config.kind == LossScalerConfig::Kind::none ? 1.0 : config.scale),
      hysteresis_tracker_(config.hysteresis) {
  if (!(scale_ > 0) || !std::isfinite(scale_))
    throw Error("loss scaler: the loss scale must be a positive number, got {}", config.scale);
  if (dynamic()) {
    if (!(config.min_scale > 0) || config.min_scale > scale_)
      throw Error("loss scaler: --min-loss-scale ({}) must be positive and at most the initial "
                  "scale ({})", config.min_scale, scale_);
    if (config.window < 1)
      throw Error("loss scaler: --loss-scale-window must be at least 1, got {}", config.window);
    if (config.hysteresis < 1)
      throw Error("loss scaler: --hysteresis must be at least 1, got {}", config.hysteresis);
  }
}

void LossScaler::update(bool found_non_finite) {
  if (!dynamic()) return;
  if (found_non_finite) {
    growth_tracker_ = 0;
    --hysteresis_tracker_;
    if (hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * config_.backoff_factor, config_.min_scale);
    return;
  }
  ++growth_tracker_;
  if (growth_tracker_ == config_.window) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = config_.hysteresis;
    scale_ *= config_.growth_factor;
  }
}

nlohmann::json LossScaler::state() const {
  return {{"scale", scale_}, {"growth_tracker", growth_tracker_},
          {"hysteresis_tracker", hysteresis_tracker_}};
}

void LossScaler::load_state(const nlohmann::json& state) {
  if (!dynamic() || state.is_null()) return;
  try {
    const double scale = state.at("scale").get<double>();
    if (!(scale > 0) || !std::isfinite(scale)) throw Error("scale {}", scale);
    scale_ = scale;
    growth_tracker_ = state.at("growth_tracker").get<int64_t>();
    hysteresis_tracker_ = state.at("hysteresis_tracker").get<int64_t>();
  } catch (const std::exception& e) {
    throw Error("checkpoint: loss_scaler state is malformed ({})", e.what());
  }
}

std::string LossScaler::describe() const {
  switch (config_.kind) {
    case LossScalerConfig::Kind::none: return "none";
    case LossScalerConfig::Kind::constant: return fmt::format("static {}", scale_);
    case LossScalerConfig::Kind::dynamic: break;
  }
  return fmt::format("dynamic (initial {}, min {}, window {}, hysteresis {})", config_.scale,
                     config_.min_scale, config_.window, config_.hysteresis);
}

}  // namespace kiln::optim
