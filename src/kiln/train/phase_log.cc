#include "kiln/train/phase_log.h"

#include "kiln/log/mllog_keys.h"

namespace kiln::train {

PhaseLog::PhaseLog(MlperfPhase phase, Sinks& sinks, const std::filesystem::path& output_dir, const std::string& name,
                   const ResumePoint& resume)
    : phase_(phase), sinks_(sinks), continues_(resume.continues_run()) {
  if (phase != MlperfPhase::init) {
    path_ = sinks.open_mllog(output_dir, name, resume, phase == MlperfPhase::run);
    if (phase == MlperfPhase::run && sinks.mllog() && !continues_) sinks.mllog()->start(log::key::kRunStart);
    return;
  }
  path_ = output_dir / name;
  if (sinks.is_rank0()) init_log_.emplace(path_, false);
}

void PhaseLog::log_preamble(const std::function<void(log::MlLogger&)>& submission,
                            const std::function<void(log::MlLogger&)>& hyperparameters) {
  if (init_log_) submission(*init_log_);
  log::MlLogger* ml = sinks_.mllog();
  if (!ml || continues_) return;
  if (phase_ == MlperfPhase::both) submission(*ml);
  hyperparameters(*ml);
}

void PhaseLog::finish_init_phase() {
  if (init_log_) init_log_->end(log::key::kInitStop);
}

}  // namespace kiln::train
