#include "kiln/train/config/mlperf_phase.h"

#include "kiln/core/error.h"

namespace kiln::train {

void register_mlperf_phase(ConfigRegistry& r, MlperfPhaseConfig& c) {
  r.add_string("run.mlperf_phase", &c.name, "", {"--mlperf-phase"},
               "init or run: one phase of a two-process MLPerf run (scripts/run_and_time_*.sh)");
  r.add_bool("run.init_mlperf", &c.init_env, "INITMLPERF", {}, "the init phase (= run.mlperf_phase init)");
  r.add_bool("run.run_mlperf", &c.run_env, "RUNMLPERF", {}, "the run phase (= run.mlperf_phase run)");
}

void finalize_mlperf_phase(MlperfPhaseConfig& c) {
  if (c.name != "" && c.name != "init" && c.name != "run")
    throw Error("config: run.mlperf_phase (--mlperf-phase) must be init or run, got '{}'", c.name);
  const bool init = c.init_env || c.name == "init", run = c.run_env || c.name == "run";
  if (init && run)
    throw Error("config: INITMLPERF / RUNMLPERF / --mlperf-phase ask for both the init and the run phase; "
                "run them as two processes");
  c.phase = init ? MlperfPhase::init : run ? MlperfPhase::run : MlperfPhase::both;
}

}  // namespace kiln::train
