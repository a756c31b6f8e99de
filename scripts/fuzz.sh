#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cc) with clang + ASan/UBSan in build-fuzz and runs
# each for SECONDS (default 60) on a corpus in build-fuzz/corpus/<target>, seeded from
# fuzz/seeds/<target>. Exits non-zero if any target crashes; artifacts go to build-fuzz/crashes.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (JOBS=n runs n targets at once; default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
build=build-fuzz
bash scripts/fetch_data.sh >/dev/null   # the tokenizer targets load data/vocab
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DKILN_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j"${BUILD_JOBS:-2}" fuzz_all

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in fuzz/*_fuzz.cc; do targets+=("$(basename "$src" .cc)"); done
fi

run_one() {
  local t="$1" corpus="$build/corpus/$1" log="$build/logs/$1.log"
  mkdir -p "$corpus" "$build/crashes/$t" "$build/logs"
  [ -d "fuzz/seeds/$t" ] && cp -n fuzz/seeds/"$t"/* "$corpus"/ 2>/dev/null || true
  mkdir -p "$build/tmp"
  if TMPDIR="$PWD/$build/tmp" "$build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$build/crashes/$t/" "$corpus" >"$log" 2>&1; then
    echo "fuzz $t: ok, $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs" \
         "($(grep -m1 -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')/s)"
  else
    echo "fuzz $t: CRASH — see $log and $build/crashes/$t/"
    return 1
  fi
}

rm -rf "$build/tmp"
failed=0
pids=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!)
  if [ ${#pids[@]} -ge "${JOBS:-1}" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit "$failed"
