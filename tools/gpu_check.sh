#!/usr/bin/env bash
# tools/gpu_check.sh [LOG_DIR] — the CUDA backend's check on a machine with an NVIDIA GPU (sized
# for one H200: at most 8 minutes from a cold build directory). Configures and builds kiln with
# CUDA, lists the devices, runs the CUDA unit tests and the op parity suite on the GPU
# (KILN_PARITY_DEVICE=cuda:0: every op of backend.h against float64 references; an op the
# CUDA backend lacks fails with "not implemented" and is listed apart from wrong results; the
# run is stopped after 5 minutes, a hung kernel's budget), and prints a short table last.
# Each step's full output goes to LOG_DIR/<step>.log (default: gpu-check-<UTC time>).
# Environment: KILN_GPU_BUILD_DIR (default build-gpu), KILN_GPU_JOBS (default: all cores).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
log_dir=${1:-$root/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
build=${KILN_GPU_BUILD_DIR:-$root/build-gpu}
jobs=${KILN_GPU_JOBS:-$(nproc)}
mkdir -p "$log_dir"
rows=()

# step NAME COMMAND...: runs COMMAND with its output in NAME.log and adds a row to the table.
step() {
  local name=$1 start=$SECONDS status=ok
  shift
  "$@" >"$log_dir/$name.log" 2>&1 || status=FAIL
  rows+=("$(printf '%-12s %-5s %5ds  %s' "$name" "$status" $((SECONDS - start)) "$(summary "$name")")")
  [[ $status == ok ]]
}

# What a step's log says in one line: gtest's counts, or the log's last line.
summary() {
  local log=$log_dir/$1.log
  if grep -q '^\[==========\]' "$log"; then
    local passed failed
    passed=$(grep -c '^\[       OK \]' "$log")
    failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$log")
    echo "$passed passed, $((failed / 2)) failed"
  else
    tail -n 1 "$log" | cut -c1-60
  fi
}

configure() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON &&
    grep -q '^CMAKE_CUDA_COMPILER:FILEPATH=/' "$build/CMakeCache.txt"
}

if step configure configure && step build cmake --build "$build" -j "$jobs" --target kiln kiln_tests; then
  step devices "$build/kiln" devices
  step unit "$build/kiln_tests" --gtest_filter='CudaBodies.*:Devices.*'
  step parity env KILN_PARITY_DEVICE=cuda:0 timeout 300 "$build/kiln_tests" --gtest_filter='Parity*'
fi

{
  echo
  echo "kiln GPU check ($(date -u +%FT%TZ)); logs in $log_dir"
  printf '%-12s %-5s %6s  %s\n' step state time result
  printf '%s\n' "${rows[@]}"
  if [[ -f $log_dir/parity.log ]]; then
    echo "parity tests failing on the GPU:"
    grep '^\[  FAILED  \] [A-Za-z]' "$log_dir/parity.log" | sort -u | sed 's/^\[  FAILED  \]/ /'
    echo "ops not implemented on the GPU (their tests fail above):"
    grep -o 'op [a-z0-9_]*: not implemented on cuda' "$log_dir/parity.log" | sort -u |
      sed 's/^op \([a-z0-9_]*\).*/  \1/'
  fi
} | tee "$log_dir/summary.txt"
