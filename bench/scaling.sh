#!/usr/bin/env bash
# Data-parallel scaling on this machine: samples/s of `kiln train bert|resnet` with 1 process using
# every core against N processes under mpirun (each pinned to its share of the cores), and the
# share of the step spent in (or waiting on) gradient communication, from the console line of the
# last interval. Usage: bench/scaling.sh [bert|resnet] [N] [FLAG...]   (N: processes, default nproc;
# FLAGs go to the N-process run only, e.g. --tensor-model-parallel-size 2 or
# --use-distributed-optimizer; tensor- and pipeline-parallel exchanges count as compute there).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-bert}
ranks=${2:-$(nproc)}
shift $(( $# < 2 ? $# : 2 ))
layout=("$@")
ninja -C "$root/build" kiln >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
case $model in
  bert) args=(train bert --config "$root/configs/${BERT_CONFIG:-bert-base}.toml" --seq-length 128 --max-predictions 20
              --global-batch-size 16 --micro-batch-size 8) ;;
  resnet) args=(train resnet --batch-size 16) ;;
  *) echo "unknown model $model (bert or resnet)" >&2; exit 2 ;;
esac
args+=(--benchmark 12 --log-interval 4 --output-dir "$out")
as_root=$([[ $(id -u) == 0 ]] && echo --allow-run-as-root || true)

# The last console line: "... data D ms, compute C ms[, comm M ms (N ranks)] | S unit/s | ..."
report() {  # label, console output
  local line
  line=$(grep -E '^(epoch +[0-9]+ )?step' <<<"$2" | tail -1)
  local compute comm rate
  compute=$(grep -o 'compute [0-9.]* ms' <<<"$line" | grep -o '[0-9.]*')
  comm=$(grep -o 'comm [0-9.]* ms' <<<"$line" | grep -o '[0-9.]*' || echo 0)
  rate=$(grep -oE '\| [0-9.]+ (samples|images)/s' <<<"$line" | grep -oE '[0-9.]+')
  awk -v l="$1" -v r="$rate" -v c="$compute" -v m="$comm" \
    'BEGIN { printf "| %s | %s | %s | %s | %.0f%% |\n", l, r, c, m, 100 * m / (c + m) }'
}
echo "| layout | samples/s | compute ms/step | comm ms/step | comm share |"
echo "| --- | --- | --- | --- | --- |"
report "1 process x $(nproc) threads" "$("$root/build/kiln" "${args[@]}")"
report "$ranks processes (mpirun) ${layout[*]}" \
  "$(mpirun -np "$ranks" --oversubscribe --bind-to none $as_root "$root/build/kiln" "${args[@]}" "${layout[@]}")"
