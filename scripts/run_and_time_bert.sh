#!/usr/bin/env bash
# scripts/run_and_time_bert.sh — an MLPerf BERT run as tinygrad's run_and_time.sh makes it: an
# init phase (INITMLPERF=1, BERT_LAYERS=2, BENCHMARK=10 on fake data) then a run phase
# (RUNMLPERF=1, real data), one seed, one MLPerf log.
set -uo pipefail

usage() {
  cat <<'TEXT'
usage: scripts/run_and_time_bert.sh [kiln train bert flags...]
  e.g. scripts/run_and_time_bert.sh --config configs/bert-large.toml --data /data/bert
environment:
  SEED                 seed for both phases (default: $RANDOM)
  OUTPUT_DIR           where result_bert_<seed>.log and the console log go (default: .)
  SUBMISSION_PLATFORM  MLPerf submission_platform, also in the console log's name (kiln-cpu)
  INIT_BENCHMARK       steps of the init phase (10)
  KILN                 the kiln binary (default: build/kiln, else kiln on PATH)
  BASEDIR, BS, ...     any kiln train bert environment variable (kiln train bert --help)
Exit status: the run phase's (1 when the init phase fails).
TEXT
}

case "${1:-}" in -h|--help) usage; exit 0 ;; esac
# shellcheck source=scripts/run_and_time.sh
source "$(dirname "${BASH_SOURCE[0]}")/run_and_time.sh"
run_and_time bert "BERT_LAYERS=2" "$@"
