#!/usr/bin/env bash
# scripts/run_and_time.sh — shared by run_and_time_bert.sh and run_and_time_resnet.sh (sourced):
# run_and_time BENCH [kiln train flags...] runs tinygrad's two MLPerf phases as two processes
# with one seed, both appending to OUTPUT_DIR/result_BENCH_SEED.log; all output is tee'd to
# OUTPUT_DIR/BENCH_PLATFORM_MMDDHHMM_SEED.log. Returns the run phase's exit status.

# run_and_time_usage BENCH EXAMPLE_FLAGS: the usage text of run_and_time_BENCH.sh.
run_and_time_usage() {
  local bench=$1 example=$2
  cat <<TEXT
usage: scripts/run_and_time_$bench.sh [kiln train $bench flags...]
  e.g. scripts/run_and_time_$bench.sh $example
environment:
  SEED                 seed for both phases (default: \$RANDOM)
  OUTPUT_DIR           where result_${bench}_<seed>.log and the console log go (default: .)
  SUBMISSION_PLATFORM  MLPerf submission_platform, also in the console log's name (kiln-cpu)
  INIT_BENCHMARK       steps of the init phase (10)
  KILN                 the kiln binary (default: build/kiln, else kiln on PATH)
  LAUNCH               a launcher for both phases, e.g. "mpirun -np 8" for a preset of 8 devices
  BASEDIR, BS, ...     any kiln train $bench environment variable (kiln train $bench --help)
Exit status: the run phase's (1 when the init phase fails).
TEXT
}

kiln_binary() {
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  if [[ -n "${KILN:-}" ]]; then echo "$KILN"
  elif [[ -x "$here/../build/kiln" ]]; then echo "$here/../build/kiln"
  else echo kiln
  fi
}

run_and_time() {
  local bench=$1 init_env=$2
  shift 2
  local kiln out stamp console
  kiln=$(kiln_binary)
  out=${OUTPUT_DIR:-.}
  mkdir -p "$out"
  export SEED=${SEED:-$RANDOM}
  export SUBMISSION_PLATFORM=${SUBMISSION_PLATFORM:-kiln-cpu}
  stamp=$(date '+%m%d%H%M')
  console="$out/${bench}_${SUBMISSION_PLATFORM}_${stamp}_${SEED}.log"
  echo "run_and_time $bench: seed $SEED, MLPerf log $out/result_${bench}_${SEED}.log, console $console"

  # Init phase: fake data, zero weights, BENCHMARK steps to warm caches; logs up to init_stop.
  # shellcheck disable=SC2086  # init_env is a list of VAR=value words
  # shellcheck disable=SC2086  # LAUNCH is a command line, split into words
  if ! env INITMLPERF=1 BENCHMARK="${INIT_BENCHMARK:-10}" $init_env ${LAUNCH:-} \
      "$kiln" train "$bench" --output-dir "$out" "$@" 2>&1 | tee "$console"; then
    echo "run_and_time $bench: the init phase failed" | tee -a "$console"
    return 1
  fi
  # Run phase: appends run_start .. run_stop to the same MLPerf log, on the real data.
  # shellcheck disable=SC2086
  env RUNMLPERF=1 ${LAUNCH:-} "$kiln" train "$bench" --output-dir "$out" "$@" 2>&1 | tee -a "$console"
  return "${PIPESTATUS[0]}"
}
