#!/usr/bin/env bash
# The built-in default job: fetch the pinned vocab and corpus, prepare MLPerf-style BERT data,
# pretrain BERT-tiny on the CPU, evaluate, checkpoint. About 10 minutes on 2 cores.
# Usage: scripts/demo.sh [extra `kiln train bert` flags...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
bash scripts/fetch_data.sh data
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build kiln

if [[ ! -f data/bert-demo/manifest.json ]]; then
  ./build/kiln prepare bert --input data/text/sotu.txt --vocab data/vocab/bert-base-uncased-vocab.txt \
    --output data/bert-demo --max-seq-length 128 --max-predictions 20 --dupe-factor 1 \
    --eval-documents 12 --eval-samples 2000 --workers "$(nproc)"
fi
mkdir -p runs/bert-demo
./build/kiln train bert --config configs/bert-tiny-demo.toml --data data/bert-demo \
  --vocab data/vocab/bert-base-uncased-vocab.txt --output-dir runs/bert-demo \
  --save runs/bert-demo/checkpoints "$@"
