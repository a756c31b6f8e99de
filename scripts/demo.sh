#!/usr/bin/env bash
# The built-in default jobs, on the CPU with small real data (about 10 minutes on 2 cores):
#   bert    fetch the pinned vocab and State of the Union corpus, prepare MLPerf-style samples,
#           pretrain BERT-tiny, evaluate, checkpoint
#   resnet  write Fashion-MNIST as JPEG class folders, train a small ResNet with LARS to the
#           MLPerf target top-1, checkpoint
# Each run's console goes to runs/<job>/console.log too, and its loss curve to runs/<job>/loss.svg.
# Usage: scripts/demo.sh [bert|resnet|all] (default all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Cache hits across clones in different folders (CI builds a fresh clone).
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
what=${1:-all}
case $what in bert|resnet|all) ;; *) echo "usage: scripts/demo.sh [bert|resnet|all]" >&2; exit 2 ;; esac
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build kiln

# Runs `kiln train` for JOB with the console also in runs/JOB/console.log, then draws its loss.
train() {  # job title args...
  local job=$1 title=$2
  shift 2
  mkdir -p "runs/$job"
  ./build/kiln train "$@" --output-dir "runs/$job" --save "runs/$job/checkpoints" | tee "runs/$job/console.log"
  python3 tools/loss_curves.py --title "$title" --out "runs/$job/loss.svg" "$job=runs/$job/console.log"
  echo "loss curve: runs/$job/loss.svg"
}

if [[ $what != resnet ]]; then
  bash scripts/fetch_data.sh data
  if [[ ! -f data/bert-demo/manifest.json ]]; then
    ./build/kiln prepare bert --input data/text/sotu.txt --vocab data/vocab/bert-base-uncased-vocab.txt \
      --output data/bert-demo --max-seq-length 128 --max-predictions 20 --dupe-factor 1 \
      --eval-documents 12 --eval-samples 2000 --workers "$(nproc)"
  fi
  train bert-demo "BERT-tiny demo: training loss (MLM + NSP)" bert --config configs/bert-tiny-demo.toml \
    --data data/bert-demo --vocab data/vocab/bert-base-uncased-vocab.txt
fi

if [[ $what != bert ]]; then
  fashion=/usr/share/datasets/fashion-mnist
  if [[ ! -d data/fashion-mnist/val ]]; then
    ./build/kiln images from-idx --images $fashion/train-images-idx3-ubyte.gz \
      --labels $fashion/train-labels-idx1-ubyte.gz --output data/fashion-mnist/train --limit 6000
    ./build/kiln images from-idx --images $fashion/t10k-images-idx3-ubyte.gz \
      --labels $fashion/t10k-labels-idx1-ubyte.gz --output data/fashion-mnist/val --limit 2000
  fi
  train resnet-demo "ResNet-18 on Fashion-MNIST demo: training loss" resnet \
    --config configs/resnet-fashion-demo.toml --data data/fashion-mnist
fi
