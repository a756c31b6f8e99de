#!/usr/bin/env bash
# scripts/run_and_time_resnet.sh — an MLPerf ResNet-50 run as tinygrad's run_and_time.sh makes
# it: an init phase (INITMLPERF=1, BENCHMARK=10 on fake data) then a run phase (RUNMLPERF=1,
# real data), one seed, one MLPerf log.
set -uo pipefail

# shellcheck source=scripts/run_and_time.sh
source "$(dirname "${BASH_SOURCE[0]}")/run_and_time.sh"
case "${1:-}" in -h|--help) run_and_time_usage resnet "--config configs/resnet50.toml --data /data/imagenet"; exit 0 ;; esac
run_and_time resnet "" "$@"
