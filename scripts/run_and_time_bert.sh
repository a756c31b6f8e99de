#!/usr/bin/env bash
# scripts/run_and_time_bert.sh — an MLPerf BERT run as tinygrad's run_and_time.sh makes it: an
# init phase (INITMLPERF=1, BERT_LAYERS=2, BENCHMARK=10 on fake data) then a run phase
# (RUNMLPERF=1, real data), one seed, one MLPerf log.
set -uo pipefail

# shellcheck source=scripts/run_and_time.sh
source "$(dirname "${BASH_SOURCE[0]}")/run_and_time.sh"
case "${1:-}" in -h|--help) run_and_time_usage bert "--config configs/bert-large.toml --data /data/bert"; exit 0 ;; esac
run_and_time bert "BERT_LAYERS=2" "$@"
