#!/usr/bin/env bash
# kiln vs PyTorch (Debian python3-torch, CPU) on the same BERT training step, alternating, same
# shapes and thread count; prints median ms/step for each and the ratio. See
# ../shared/BENCHMARKING.md for the peer's fairness settings (OpenBLAS, core type, threads).
# Usage: bench/run.sh [preset: tiny|base] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-tiny}
rounds=${2:-2}
threads=$(nproc)
case $preset in
  tiny) shape=(--layers 2 --hidden 128 --heads 2 --intermediate 512 --batch 32 --seq 128 --pred 20)
        kiln_cfg=$root/configs/bert-tiny.toml; batch=32 ;;
  base) shape=(--layers 12 --hidden 768 --heads 12 --intermediate 3072 --batch 8 --seq 128 --pred 20)
        kiln_cfg=$root/configs/bert-base.toml; batch=8 ;;
  *) echo "unknown preset $preset" >&2; exit 2 ;;
esac
dpkg-query -W libopenblas0-pthread >/dev/null 2>&1 || { echo "install libopenblas0-pthread for a fair peer" >&2; exit 2; }
out=$(mktemp -d)
for ((r = 0; r < rounds; ++r)); do
  "$root/build/kiln" train bert --config "$kiln_cfg" --benchmark 9 --global-batch-size $batch \
    --seq-length 128 --max-predictions 20 --threads "$threads" --output-dir "$out" \
    | grep -o 'median [0-9.]* ms/step' | sed 's/^/kiln: /'
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 "$root/bench/bert_torch_peer.py" "${shape[@]}" --threads "$threads"
done
rm -rf "$out"
