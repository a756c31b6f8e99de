// train/mlperf_phase.h — tinygrad's two-process MLPerf run (scripts/run_and_time_*.sh), shared by
// every recipe:
//   init  (--mlperf-phase init, INITMLPERF=1): a fresh MLPerf log gets the submission events,
//         cache_clear, init_start, seed; a model with zero weights trains BENCHMARK steps (10 when
//         unset) and evaluates on fake data to warm caches, prints the estimated training time,
//         logs init_stop and exits. No checkpoints.
//   run   (--mlperf-phase run, RUNMLPERF=1): appends to that log; run_start is its first event,
//         then the hyperparameters, real data, run_stop. The log must hold the init phase's
//         init_stop and no run_start yet.
// Unset: one process logs both (the default).
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "kiln/log/mllog.h"
#include "kiln/train/config_registry.h"
#include "kiln/train/resume.h"
#include "kiln/train/sinks.h"

namespace kiln::train {

enum class MlperfPhase { both, init, run };

struct MlperfPhaseConfig {
  std::string name;  // "", "init" or "run"
  bool init_env = false, run_env = false;
  MlperfPhase phase = MlperfPhase::both;  // set by finalize_mlperf_phase
};

void register_mlperf_phase(ConfigRegistry& registry, MlperfPhaseConfig& config);
// Resolves `phase`; throws kiln::Error on an unknown name or when both phases are asked for.
void finalize_mlperf_phase(MlperfPhaseConfig& config);

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
