// train/phase_log.h — a recipe's MLPerf log in its phase (train/config/mlperf_phase.h): which file, who
// holds it, and which of the preamble's events go into it.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "kiln/log/mllog.h"
#include "kiln/train/config/mlperf_phase.h"
#include "kiln/train/resume.h"
#include "kiln/train/sinks.h"

namespace kiln::train {

// A recipe's MLPerf log in its phase. init: a fresh log held here, not in the Sinks, so the loop
// logs nothing of the phase; run: the init phase's log, appended to (Sinks::open_mllog), with
// run_start logged at once; both: Sinks::open_mllog.
class PhaseLog {
 public:
  PhaseLog(MlperfPhase phase, Sinks& sinks, const std::filesystem::path& output_dir, const std::string& name,
           const ResumePoint& resume);
  const std::filesystem::path& path() const { return path_; }
  // The events before the model is built (none when the run resumes): init: `submission`
  // (preamble up to seed); run: `hyperparameters`; both: the two.
  void log_preamble(const std::function<void(log::MlLogger&)>& submission,
                    const std::function<void(log::MlLogger&)>& hyperparameters);
  // After the init phase's training and eval: init_stop.
  void finish_init_phase();

 private:
  MlperfPhase phase_;
  Sinks& sinks_;
  bool continues_;
  std::filesystem::path path_;
  std::optional<log::MlLogger> init_log_;
};

}  // namespace kiln::train
