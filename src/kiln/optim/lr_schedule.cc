#include "kiln/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kiln/core/error.h"

namespace kiln::optim {

PolyWarmupSchedule::PolyWarmupSchedule(double base_lr, int64_t warmup_steps, int64_t total_steps,
                                       double power, double end_lr)
    : base_lr_(base_lr), power_(power), end_lr_(end_lr), total_(total_steps) {
  KILN_CHECK(total_steps > 0, "poly LR schedule: total steps {} must be positive", total_steps);
  KILN_CHECK(warmup_steps >= 0, "poly LR schedule: warmup steps {} must not be negative", warmup_steps);
  warmup_ = std::min(warmup_steps, total_steps);
}

double PolyWarmupSchedule::lr(int64_t step) const {
  const double c = double(step), w = double(warmup_);
  if (warmup_ > 0 && c <= w) return c / w * base_lr_;
  const double frac = std::max(0.0, 1.0 - (c - w) / (double(total_) - w + 1.0));
  return (base_lr_ - end_lr_) * std::pow(frac, power_) + end_lr_;
}

WarmupDecaySchedule::WarmupDecaySchedule(DecayStyle style, double max_lr, double min_lr,
                                         int64_t warmup_steps, int64_t decay_steps)
    : style_(style), max_lr_(max_lr), min_lr_(min_lr), warmup_(warmup_steps), decay_(decay_steps) {
  KILN_CHECK(warmup_steps >= 0, "LR schedule: warmup {} must not be negative", warmup_steps);
  KILN_CHECK(decay_steps > 0 && decay_steps >= warmup_steps,
             "LR schedule: decay steps {} must be positive and at least the warmup steps {}", decay_steps,
             warmup_steps);
  KILN_CHECK(min_lr <= max_lr, "LR schedule: min lr {} exceeds max lr {}", min_lr, max_lr);
}

double WarmupDecaySchedule::lr(int64_t step) const {
  if (warmup_ > 0 && step <= warmup_) return max_lr_ * double(step) / double(warmup_);
  if (step > decay_) return min_lr_;
  const double r = double(step - warmup_) / double(decay_ - warmup_);
  const double coeff = style_ == DecayStyle::kLinear ? 1.0 - r : 0.5 * (std::cos(std::numbers::pi * r) + 1.0);
  return min_lr_ + (max_lr_ - min_lr_) * coeff;
}

}  // namespace kiln::optim
