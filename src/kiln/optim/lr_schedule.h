// optim/lr_schedule.h — learning-rate schedules. lr(k) is the rate for optimizer step k (0-based);
// the unit of k is whatever the caller counts (steps for tinygrad, samples for Megatron).
#pragma once
#include <cstdint>

namespace kiln::optim {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr(int64_t step) const = 0;
};

// tinygrad's PolynomialDecayWithWarmup (MLPerf BERT). W = min(warmup_steps, total_steps):
//   lr(c) = c/W·base_lr                                   for 0 < W and c <= W
//   lr(c) = (base_lr-end_lr)·(1-(c-W)/(T-W+1))^power + end_lr   otherwise
// Past T+1 the decay factor is held at 0 (lr = end_lr).
// With W = 1, power 1: lr(0) = 0, lr(1) = base_lr, lr(k >= 2) = base_lr·(1-(k-1)/T).
class PolyWarmupSchedule : public LrSchedule {
 public:
  PolyWarmupSchedule(double base_lr, int64_t warmup_steps, int64_t total_steps, double power = 1.0,
                     double end_lr = 0.0);
  double lr(int64_t step) const override;

 private:
  double base_lr_, power_, end_lr_;
  int64_t warmup_, total_;
};

enum class DecayStyle { kLinear, kCosine };

// Megatron's OptimizerParamScheduler (warmup init lr 0):
//   lr(n) = max_lr·n/warmup                         for 0 < warmup and n <= warmup
//   lr(n) = min_lr                                  for n > decay_steps
//   r = (n-warmup)/(decay_steps-warmup)
//   linear: min_lr + (max_lr-min_lr)·(1-r)          cosine: min_lr + (max_lr-min_lr)·(cos(π·r)+1)/2
class WarmupDecaySchedule : public LrSchedule {
 public:
  WarmupDecaySchedule(DecayStyle style, double max_lr, double min_lr, int64_t warmup_steps,
                      int64_t decay_steps);
  double lr(int64_t step) const override;

 private:
  DecayStyle style_;
  double max_lr_, min_lr_;
  int64_t warmup_, decay_;
};

class LinearWarmupDecaySchedule : public WarmupDecaySchedule {
 public:
  LinearWarmupDecaySchedule(double max_lr, double min_lr, int64_t warmup_steps, int64_t decay_steps)
      : WarmupDecaySchedule(DecayStyle::kLinear, max_lr, min_lr, warmup_steps, decay_steps) {}
};

class CosineWarmupDecaySchedule : public WarmupDecaySchedule {
 public:
  CosineWarmupDecaySchedule(double max_lr, double min_lr, int64_t warmup_steps, int64_t decay_steps)
      : WarmupDecaySchedule(DecayStyle::kCosine, max_lr, min_lr, warmup_steps, decay_steps) {}
};

}  // namespace kiln::optim
