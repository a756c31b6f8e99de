#include "kiln/train/config/resume_flags.h"

namespace kiln::train {

void register_resume_flags(ConfigRegistry& r, ResumeFlags& f) {
  r.add_bool("run.no_load_optim", &f.no_load_optim, "", {"--no-load-optim"},
             "resume without the optimizer state (fresh moments, LR schedule from its start)");
  r.add_bool("run.no_load_rng", &f.no_load_rng, "", {"--no-load-rng"},
             "resume without the random state (continue with this run's seed)");
  r.add_bool("run.finetune", &f.finetune, "", {"--finetune"},
             "load only the weights: step 0, fresh optimizer and seed, a new MLPerf log");
  r.add_bool("run.allow_non_finite", &f.allow_non_finite, "", {"--allow-non-finite"},
             "load resumed or imported weights that hold NaN or Inf (refused otherwise)");
}

}  // namespace kiln::train
