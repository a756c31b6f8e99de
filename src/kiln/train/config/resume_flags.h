// train/config/resume_flags.h — what a run loads from the checkpoint it resumes (Megatron's flags, shared
// by every recipe; train/resume.h applies them):
//   --no-load-optim   not the optimizer: its state (moments, step count, hence the learning-rate
//                     schedule's position) and the loss scaler start fresh; a different
//                     optim.optimizer is then allowed
//   --no-load-rng     not the random state: kiln's random streams are functions of (seed, step),
//                     so the seed is that state; a different train.seed is then allowed and the
//                     run continues with its own
//   --finetune        the weights only: step 0, fresh optimizer, this run's seed, the data from
//                     its start, a new MLPerf log; sequence length and batch may differ
//   --allow-non-finite  load weights (and optimizer state) holding NaN or Inf, which are
//                     otherwise refused naming the tensor (io/finite_check.h); also for the
//                     TensorFlow checkpoint of --init-checkpoint
#pragma once

#include "kiln/train/config/config_registry.h"

namespace kiln::train {

struct ResumeFlags {
  bool no_load_optim = false;
  bool no_load_rng = false;
  bool finetune = false;
  bool allow_non_finite = false;
};

// run.no_load_optim, run.no_load_rng, run.finetune, run.allow_non_finite.
void register_resume_flags(ConfigRegistry& registry, ResumeFlags& flags);

}  // namespace kiln::train
