// train/config/mlperf_phase.h — tinygrad's two-process MLPerf run (scripts/run_and_time_*.sh), shared by
// every recipe:
//   init  (--mlperf-phase init, INITMLPERF=1): a fresh MLPerf log gets the submission events,
//         cache_clear, init_start, seed; a model with zero weights trains BENCHMARK steps (10 when
//         unset) and evaluates on fake data to warm caches, prints the estimated training time,
//         logs init_stop and exits. No checkpoints.
//   run   (--mlperf-phase run, RUNMLPERF=1): appends to that log; run_start is its first event,
//         then the hyperparameters, real data, run_stop. The log must hold the init phase's
//         init_stop and no run_start yet.
// Unset: one process logs both (the default). train/phase_log.h: which log each phase writes.
#pragma once
#include <string>

#include "kiln/train/config/config_registry.h"

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

}  // namespace kiln::train
