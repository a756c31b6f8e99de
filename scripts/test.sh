#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds kiln, and runs every test (ctest); without ctest
# arguments (what CI runs) also every libFuzzer target for KILN_FUZZ_SECONDS each (default 30;
# 0 skips), where a crash fails the run.
# Usage: scripts/test.sh [ctest args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Cache hits across clones in different folders (CI builds a fresh clone).
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
bash scripts/setup.sh
bash scripts/fetch_data.sh >/dev/null   # the pinned test text and vocab, into data/
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build
# One test at a time: the integration tests each use every core (OpenMP), and two at once
# would oversubscribe them many times over.
ctest --test-dir build --output-on-failure "$@"
if [[ $# -eq 0 && ${KILN_FUZZ_SECONDS:-30} -gt 0 ]]; then
  bash scripts/fuzz.sh "${KILN_FUZZ_SECONDS:-30}"
fi
