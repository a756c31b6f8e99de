#!/usr/bin/env bash
# The long kill drills: `kiln train bert` and `kiln train resnet` killed N times each (SIGKILL at
# random moments and inside checkpoint saves) and resumed, checked bitwise against uninterrupted
# runs and with the official MLPerf checker (tests/train/kill_drill_test.cc; ctest runs a short
# version, label drill). A run that reaches its target before N kills starts a new cycle.
# Usage: scripts/drills.sh [N]   (default 20; KILN_DRILL_SEED=s repeats the random choices)
# The checker: KILN_MLPERF_LOGGING=<mlcommons/logging checkout>, or the mlperf_logging package.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j"${BUILD_JOBS:-2}" kiln kiln_tests
KILN_DRILL_KILLS=${1:-20} ./build/kiln_tests --gtest_filter='KillDrill.*' --gtest_brief=0
