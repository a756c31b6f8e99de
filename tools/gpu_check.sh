#!/usr/bin/env bash
# tools/gpu_check.sh [--rehearse | --prebuilt] [LOG_DIR] — the CUDA backend's check on a machine with an NVIDIA
# GPU (sized for one H200: at most 8 minutes from a cold build directory). Configures and builds kiln with
# CUDA, lists the devices, runs the CUDA unit tests and the op parity suite on the GPU
# (KILN_PARITY_DEVICE=cuda:0: every op of backend.h against float64 references; an op the
# CUDA backend lacks fails with "not implemented" and is listed apart from wrong results; the
# run is stopped after 5 minutes, a hung kernel's budget), trains bert-tiny and a small ResNet
# for 20 steps on the GPU and on the CPU (losses within 1e-3 relative; the dropout masks are the
# parity suite's bitwise check), bert-tiny in fp16 with and without the optimizer phase's CUDA
# graph (losses identical), bert-tiny stopped at step 10 and resumed from its checkpoint (losses
# identical to the uninterrupted run's), bert-tiny also as TP 2 x PP 2 in bf16 (4 ranks on the one GPU
# under mpirun, collectives staged through the host), times BERT-large S512 and ResNet-50 224 training steps in bf16
# (kiln's median and MFU, then PyTorch's on the same GPU where python3 has torch with CUDA),
# profiles both (KILN_PROFILE=1: time per op type), and prints a short table last; exits non-zero
# when a step failed. On one H200 the first run took 76 s from a build made elsewhere (--prebuilt).
# Each step's full output goes to LOG_DIR/<step>.log (default: gpu-check-<UTC time>).
# --rehearse: the same steps without a GPU, on the simulated device (`--device sim`: host
# memory and the CPU kernels behind a GPU's data path, graphs included) against the CPU, over an
# existing build (KILN_GPU_BUILD_DIR, default build) and with the benchmarks at batch 1-2 for 3
# steps (the profiled BERT is bert-tiny). It checks the script itself (command lines, test
# filters, what it reads from the logs), so that a GPU's few minutes are not lost to it; ctest
# runs it (GpuCheckRehearsal).
# --prebuilt: on the GPU, over a build made elsewhere (KILN_GPU_BUILD_DIR: tools/gpu_bundle.sh's archive
# unpacked), for a GPU machine without kiln's build dependencies.
# Environment: KILN_GPU_BUILD_DIR (default build-gpu), KILN_GPU_JOBS (default: all cores),
# KILN_CACHE_DIR (the algorithm search's winners; default LOG_DIR/cache, so each check searches),
# KILN_PARITY_TIMEOUT (seconds the parity suite may run; default 300).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
rehearse=0 prebuilt=0 gpu=cuda parity_device=cuda:0 default_build=build-gpu
if [[ ${1:-} == --rehearse ]]; then
  rehearse=1 prebuilt=1 gpu=sim parity_device=sim default_build=build
  shift
elif [[ ${1:-} == --prebuilt ]]; then
  prebuilt=1
  shift
fi
log_dir=${1:-$root/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
build=${KILN_GPU_BUILD_DIR:-$root/$default_build}
jobs=${KILN_GPU_JOBS:-$(nproc)}
mkdir -p "$log_dir"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$log_dir/cache}
rows=()
failed=0
launch=()  # what train() starts kiln under (train_ranks: mpirun)

# step NAME COMMAND...: runs COMMAND with its output in NAME.log and adds a row to the table.
step() {
  local name=$1 start=$SECONDS status=ok
  shift
  "$@" >"$log_dir/$name.log" 2>&1 || { status=FAIL; failed=$((failed + 1)); }
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

# train NAME TOLERANCE ARGS...: `kiln train ARGS` for 20 steps on the GPU and on the CPU (same seed,
# fake data, so the same batches and dropout masks); every step's loss (KILN_TEST_LOSS_LOG, exact)
# must agree within TOLERANCE relative. Prints the largest relative difference.
train() {
  local name=$1 tolerance=$2
  shift 2
  local out=$log_dir/$name
  rm -rf "$out" && mkdir -p "$out"
  for device in "$gpu" cpu; do
    KILN_TEST_LOSS_LOG=$out/$device.losses timeout 240 "${launch[@]}" "$build/kiln" train "$@" --device "$device" \
      --output-dir "$out/$device" --log-interval 5 || return 1
  done
  python3 - "$out/$gpu.losses" "$out/cpu.losses" "$tolerance" <<'PY'
import sys
read = lambda p: [float.fromhex(line.split()[1]) for line in open(p)]
gpu, cpu, tol = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
assert len(gpu) == len(cpu) == 20, f"{len(gpu)} GPU and {len(cpu)} CPU steps"
worst = max(abs(g - c) / abs(c) for g, c in zip(gpu, cpu))
print(f"20 steps, largest relative loss difference {worst:.2e} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)
PY
}

# graph_same NAME ARGS...: `kiln train ARGS` on the GPU with the optimizer phase and the layers
# captured in CUDA graphs and replayed (the default) and with KILN_GRAPH=0: every step's loss must be
# identical, and the first run must have replayed its graphs.
graph_same() {
  local name=$1
  shift
  local out=$log_dir/$name
  rm -rf "$out" && mkdir -p "$out"
  for graph in 1 0; do
    KILN_GRAPH=$graph KILN_TEST_LOSS_LOG=$out/graph$graph.losses timeout 240 "$build/kiln" train "$@" \
      --device "$gpu" --output-dir "$out/graph$graph" --log-interval 5 || return 1
  done
  grep -Eq 'graphs: [0-9]+ captured, [1-9][0-9]* replays' "$log_dir/$name.log" || { echo "no graph was replayed"; return 1; }
  cmp -s "$out/graph1.losses" "$out/graph0.losses" || { echo "losses differ with the graph"; return 1; }
  echo "graph replayed; every loss identical to KILN_GRAPH=0"
}

# resume NAME ARGS...: `kiln train ARGS` on the GPU for 20 steps; then stopped at step 10 with a
# checkpoint (staged through the host) and resumed from it: the two halves' losses must be the
# uninterrupted run's, bit for bit.
resume() {
  local name=$1
  shift
  local out=$log_dir/$name
  rm -rf "$out" && mkdir -p "$out"
  KILN_TEST_LOSS_LOG=$out/whole.losses timeout 240 "$build/kiln" train "$@" --device "$gpu" \
    --output-dir "$out/whole" --log-interval 5 || return 1
  local split=(--device "$gpu" --output-dir "$out/split" --save "$out/ckpt" --load "$out/ckpt" --save-interval 10
    --log-interval 5)
  KILN_TEST_LOSS_LOG=$out/split.losses timeout 240 "$build/kiln" train "$@" "${split[@]}" --exit-interval 10 || return 1
  KILN_TEST_LOSS_LOG=$out/split.losses timeout 240 "$build/kiln" train "$@" "${split[@]}" || return 1
  cmp -s "$out/split.losses" "$out/whole.losses" || { echo "the resumed run's losses differ"; return 1; }
  echo "stopped at step 10, resumed: all $(wc -l <"$out/whole.losses") losses identical"
}

# train_ranks NAME TOLERANCE RANKS ARGS...: train with RANKS processes under mpirun, all on the one GPU
# (collectives staged through the host: KILN_NCCL=0), against the same ranks on the CPU.
train_ranks() {
  local name=$1 tolerance=$2 ranks=$3
  shift 3
  command -v mpirun >/dev/null || { echo "no mpirun here: not run"; return 0; }
  local launch=(env KILN_NCCL=0 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$ranks")
  train "$name" "$tolerance" "$@"
}

# bench NAME ARGS...: kiln's BENCHMARK median on the GPU and its model FLOP utilisation against
# the bf16 dense peak (KILN_GPU_PEAK_TFLOPS, default 989: H100/H200 SXM).
bench() {
  local name=$1
  shift
  local out=$log_dir/$name-run peak=${KILN_GPU_PEAK_TFLOPS:-989}
  timeout 300 "$build/kiln" train "$@" --device "$gpu" --bf16 --output-dir "$out" --log-interval 1 || return 1
  local line gflops
  line=$(grep -o 'median [0-9.]* ms/step' "$log_dir/$name.log" | tail -1)
  gflops=$(grep -o '[0-9.]* GFLOP/s' "$log_dir/$name.log" | tail -1 | cut -d' ' -f1)
  echo "kiln $line, MFU $(python3 -c "print(f'{100 * $gflops / 1e3 / $peak:.1f}%')")"
}

# profile NAME ARGS...: `kiln train ARGS` on the GPU in bf16 under KILN_PROFILE=1 (on a GPU each op's
# scope synchronises, so the table holds device time); prints the three op types that take longest.
profile() {
  local name=$1
  shift
  KILN_PROFILE=1 timeout 300 "$build/kiln" train "$@" --device "$gpu" --bf16 --output-dir "$log_dir/$name-run" \
    --log-interval 1 || return 1
  echo "top: $(grep -A3 '^profile over' "$log_dir/$name.log" | tail -n 3 | awk '{printf "%s %s ms, ", $1, $3}')"
}

# peer NAME SCRIPT ARGS...: the PyTorch step on the same GPU, where this machine's python has torch with CUDA
# (in a rehearsal: one step on the CPU, where it has torch).
peer() {
  local name=$1 script=$2
  shift 2
  if ((rehearse)); then
    python3 -c 'import torch' 2>/dev/null || { echo "no PyTorch here: peer not run"; return 0; }
    timeout 300 python3 "$root/bench/$script" --device cpu --dtype bf16 --warmup 1 --steps 1 "$@"
    return
  fi
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "no PyTorch with CUDA here: peer not measured"; return 0; }
  timeout 300 python3 "$root/bench/$script" --device cuda --dtype bf16 "$@"
}

existing_build() {
  [[ -x $build/kiln && -x $build/kiln_tests ]] || { echo "no kiln and kiln_tests in $build"; return 1; }
  echo "$build"
}

# built: configure and build with CUDA, or take the build that is there (a rehearsal, --prebuilt).
built() {
  if ((prebuilt)); then
    step build existing_build
  else
    step configure configure && step build cmake --build "$build" -j "$jobs" --target kiln kiln_tests
  fi
}

# The benchmarks' sizes: on a GPU the table's; in a rehearsal the same command lines, small. BERT's
# evaluation that ends a benchmark runs at the training batch (the preset's EVAL_BS 96 would not fit a rehearsal).
bert_large_batch=16 resnet50_batch=128 bench_steps=10 profiled_bert=bert-large
((rehearse)) && bert_large_batch=1 resnet50_batch=2 bench_steps=3 profiled_bert=bert-tiny

if built; then
  step devices "$build/kiln" devices
  step unit "$build/kiln_tests" --gtest_filter='CudaBodies.*:Devices.*:SimDevice.*:AlgoCache.*:OpGraph.*:GraphedRegion.*:NcclOneRank.*'
  step parity env KILN_PARITY_DEVICE="$parity_device" timeout "${KILN_PARITY_TIMEOUT:-300}" "$build/kiln_tests" --gtest_filter='Parity*'
  step bert-tiny train bert-tiny 1e-3 bert --config "$root/configs/bert-tiny.toml" --fake-data --seq-length 128 \
    --max-predictions 20 --global-batch-size 32 --train-iters 20 --eval-interval 1000
  step bert-graph graph_same bert-graph bert --config "$root/configs/bert-tiny.toml" --fake-data --seq-length 128 \
    --max-predictions 20 --global-batch-size 32 --micro-batch-size 16 --train-iters 20 --eval-interval 1000 --fp16 \
    --initial-loss-scale 1e9 --loss-scale-window 4 --clip-grad 1.0
  step bert-resume resume bert-resume bert --config "$root/configs/bert-tiny.toml" --fake-data --seq-length 128 \
    --max-predictions 20 --global-batch-size 32 --train-iters 20 --eval-interval 1000 --bf16
  step bert-tp2pp2 train_ranks bert-tp2pp2 5e-3 4 bert --config "$root/configs/bert-tiny.toml" --fake-data \
    --seq-length 128 --max-predictions 20 --global-batch-size 32 --micro-batch-size 4 --train-iters 20 \
    --eval-interval 1000 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --bf16
  step resnet-small train resnet-small 1e-3 resnet --arch resnet18 --width 32 --fake-data --image-size 64 \
    --eval-resize 64 --batch-size 32 --benchmark 20
  step resnet-graph graph_same resnet-graph resnet --arch resnet18 --width 32 --fake-data --image-size 64 \
    --eval-resize 64 --batch-size 32 --benchmark 20
  step bert-large bench bert-large bert --config "$root/configs/bert-large.toml" --fake-data --seq-length 512 \
    --max-predictions 76 --global-batch-size "$bert_large_batch" --eval-batch-size "$bert_large_batch" \
    --benchmark "$bench_steps"
  step torch-bert peer torch-bert bert_torch_peer.py --layers 24 --hidden 1024 --heads 16 --intermediate 4096 \
    --batch "$bert_large_batch" --seq 512 --pred 76
  step resnet50 bench resnet50 resnet --fake-data --batch-size "$resnet50_batch" --benchmark "$bench_steps"
  step torch-resnet peer torch-resnet resnet_torch_peer.py --batch "$resnet50_batch"
  step bert-prof profile bert-prof bert --config "$root/configs/$profiled_bert.toml" --fake-data --seq-length 512 \
    --max-predictions 76 --global-batch-size "$bert_large_batch" --eval-batch-size "$bert_large_batch" --benchmark 3
  step resnet-prof profile resnet-prof resnet --fake-data --batch-size "$resnet50_batch" --benchmark 3
fi

{
  echo
  echo "kiln GPU check$( ((rehearse)) && echo " rehearsal (--device sim)") ($(date -u +%FT%TZ)); logs in $log_dir"
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
((failed == 0))
