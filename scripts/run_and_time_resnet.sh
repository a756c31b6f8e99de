#!/usr/bin/env bash
# scripts/run_and_time_resnet.sh — an MLPerf ResNet-50 run as tinygrad's run_and_time.sh makes
# it: an init phase (INITMLPERF=1, BENCHMARK=10 on fake data) then a run phase (RUNMLPERF=1,
# real data), one seed, one MLPerf log.
set -uo pipefail

usage() {
  cat <<'TEXT'
usage: scripts/run_and_time_resnet.sh [kiln train resnet flags...]
  e.g. scripts/run_and_time_resnet.sh --config configs/resnet50.toml --data /data/imagenet
environment:
  SEED                 seed for both phases (default: $RANDOM)
  OUTPUT_DIR           where result_resnet_<seed>.log and the console log go (default: .)
  SUBMISSION_PLATFORM  MLPerf submission_platform, also in the console log's name (kiln-cpu)
  INIT_BENCHMARK       steps of the init phase (10)
  KILN                 the kiln binary (default: build/kiln, else kiln on PATH)
  BASEDIR, BS, ...     any kiln train resnet environment variable (kiln train resnet --help)
Exit status: the run phase's (1 when the init phase fails).
TEXT
}

case "${1:-}" in -h|--help) usage; exit 0 ;; esac
# shellcheck source=scripts/run_and_time.sh
source "$(dirname "${BASH_SOURCE[0]}")/run_and_time.sh"
run_and_time resnet "" "$@"
