#!/usr/bin/env bash
# kiln vs PyTorch (Debian python3-torch, CPU) on the same training step, alternating, same shapes
# and thread count; prints median ms/step for each. docs/PERFORMANCE.md has the peer's fairness
# settings (OpenBLAS, core type, threads; "How to measure") and the recorded results.
# Usage: bench/run.sh [bert-tiny|bert-base|resnet50|peak|table] [rounds]
#   table: the whole comparison in one invocation (bench/table.py): BERT-base S128, BERT-large S512,
#   ResNet-50 224, each in f32 and bf16, as a markdown table; `rounds` alternations per row, medians.
#   It is printed and written to $KILN_TABLE_OUT.md, beside its bar chart $KILN_TABLE_OUT.svg
#   (default ./kiln-vs-torch.md and .svg).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-bert-tiny}
rounds=${2:-2}
threads=$(nproc)
[[ -f $root/build/build.ninja ]] || cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$root/build" kiln matmul_peak >/dev/null
"$root/build/kiln" cpu | sed -n 's/^ *bf16: /bf16 here: /p' 
dpkg-query -W libopenblas0-pthread >/dev/null 2>&1 || { echo "install libopenblas0-pthread for a fair peer" >&2; exit 2; }
# OpenBLAS 0.3.21 does not recognise recent AVX-512 CPUs; forcing SkylakeX elsewhere would crash it.
if grep -qw avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
  case ${OPENBLAS_CORETYPE,,} in
    skylakex | cooperlake | sapphirerapids) ;;
    *) echo "warning: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE holds the peer's f32 matmuls below this AVX-512" \
         "CPU's kernels; set OPENBLAS_CORETYPE=SkylakeX (or unset it) for a fair peer" >&2 ;;
  esac
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
kiln_bert() {  # config batch
  "$root/build/kiln" train bert --config "$root/configs/$1.toml" --benchmark 9 --global-batch-size "$2" \
    --seq-length 128 --max-predictions 20 --threads "$threads" --output-dir "$out" \
    | grep -o 'median [0-9.]* ms/step' | sed 's/^/kiln: /'
}
for ((r = 0; r < rounds; ++r)); do
  case $preset in
    bert-tiny)
      kiln_bert bert-tiny 32
      /usr/bin/python3 "$root/bench/bert_torch_peer.py" --layers 2 --hidden 128 --heads 2 \
        --intermediate 512 --batch 32 --seq 128 --pred 20 --threads "$threads" ;;
    bert-base)
      kiln_bert bert-base 8
      /usr/bin/python3 "$root/bench/bert_torch_peer.py" --layers 12 --hidden 768 --heads 12 \
        --intermediate 3072 --batch 8 --seq 128 --pred 20 --threads "$threads" ;;
    resnet50)
      "$root/build/kiln" train resnet --benchmark 7 --batch-size 16 --threads "$threads" --output-dir "$out" \
        | grep -o 'median [0-9.]* ms/step' | sed 's/^/kiln: /'
      /usr/bin/python3 "$root/bench/resnet_torch_peer.py" --batch 16 --threads "$threads" ;;
    table)  # its rounds alternate inside each row
      table_out=${KILN_TABLE_OUT:-$PWD/kiln-vs-torch}
      /usr/bin/python3 "$root/bench/table.py" "$root" --threads "$threads" --rounds "$rounds" \
        --svg "$table_out.svg" | tee "$table_out.md"
      echo "written: $table_out.md, $table_out.svg"
      break ;;
    peak)
      # A CPU without an instruction set a dtype needs (bf16 on AVX2-only machines) must not end
      # the run: say which dtype failed and go on with the others.
      "$root/build/kiln" cpu
      if ! "$root/build/matmul_peak"; then
        echo "matmul_peak stopped early (see above): a dtype is not supported on this CPU ($("$root/build/kiln" cpu | head -1)); the lines printed before are valid" >&2
      fi ;;
    *) echo "unknown preset $preset" >&2; exit 2 ;;
  esac
done
