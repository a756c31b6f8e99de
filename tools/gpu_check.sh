#!/usr/bin/env bash
# tools/gpu_check.sh [--rehearse | --prebuilt] [--deadline SECONDS] [--references DIR] [OUT_DIR]
# tools/gpu_check.sh --prepare-references DIR
# The CUDA backend's check on a machine with an NVIDIA GPU, measuring first, under one deadline
# (--deadline, default 420 s, counted from the start): the rented minutes go to the numbers first.
#  1. environment: nvidia-smi's GPU, clocks, power and driver; `kiln devices --versions` (CUDA
#     driver and runtime, cuBLASLt, cuDNN, NCCL); PyTorch's version.
#  2. benchmarks: BERT-large S512 bf16 B16 and ResNet-50 224 bf16 B128, each as kiln's median
#     ms/step and MFU (BERT-large with the attention core auto takes, fused, and again unfused,
#     which also measures BERT where the fused kernel fails, and fused with the warps' mma.sync
#     products, KILN_FLASH_PRODUCTS=warp, which on an H100 / H200 compares them with wgmma), then
#     the PyTorch peer on the same GPU with its profile (--profile: forward + backward apart from
#     the optimizer step, torch.profiler's top ops), then kiln under
#     KILN_PROFILE=1 (time per op and per (op, shape), achieved TFLOP/s and GB/s), then the
#     performance model's expectation of the same step (--dry-run --device-model --json; the model
#     from the GPU's name: h200, h100, a100).
#  3. correctness: bert-tiny and a small ResNet, 20 steps on the GPU against the CPU's losses
#     (within 1e-3 relative; the dropout masks are the parity suite's bitwise check); the CPU's
#     losses come from --references DIR (default: the build directory's references/, where
#     tools/gpu_bundle.sh puts them) where --prepare-references DIR computed them beforehand on a
#     CPU machine for the same command lines and kiln version, else they are computed here. Then the op parity
#     suite (KILN_PARITY_DEVICE=cuda:0: every op of backend.h against float64 references; an op the
#     CUDA backend lacks fails with "not implemented" and is listed apart), capped at
#     KILN_PARITY_TIMEOUT (default 300 s) and at half the time left, so that it cannot eat the rest;
#     then the fused attention's parity again with the warps' products (KILN_FLASH_PRODUCTS=warp).
#  4. the rest: the CUDA unit tests; bert-tiny in fp16 and a small ResNet with and without their
#     CUDA graphs (losses identical); bert-tiny stopped at step 10 and resumed (losses identical);
#     bert-tiny as TP 2 x PP 2 in bf16 (4 ranks on the one GPU under mpirun, collectives staged
#     through the host) against the same ranks on the CPU.
# Each step gets at most the time left before the deadline (its commands run under `timeout`);
# a step stopped there is "stopped (deadline)", and the steps after it are "not run (deadline)".
# OUT_DIR (default gpu-check-<UTC time>) gets report.md (environment, benchmarks kiln against the
# peer with the ratio and MFU, per op class measured beside the model, per (op, shape) rows,
# correctness, the steps and what failed; tools/gpu_report.py writes it) and every step's log
# (<step>.log, the model's <model-*>.json). Exits non-zero when a step failed.
# --rehearse: the same steps without a GPU, on the simulated device (`--device sim`: host memory and
# the CPU kernels behind a GPU's data path, graphs included) against the CPU, over an existing build
# (KILN_GPU_BUILD_DIR, default build), with the benchmarks at batch 1-2 for 3 steps (the profiled
# BERT is bert-tiny), the peers on the CPU where python3 has torch, the device model h200, and a
# deadline of 1500 s unless --deadline says otherwise. It checks the script itself (command lines,
# test filters, what it reads from the logs, the report, the deadline), so that a GPU's few minutes
# are not lost to it; ctest runs it (GpuCheckRehearsal, and GpuCheckDeadline with a 1 s deadline).
# --prebuilt: on the GPU, over a build made elsewhere (KILN_GPU_BUILD_DIR: tools/gpu_bundle.sh's
# archive unpacked), for a GPU machine without kiln's build dependencies; otherwise the check
# configures and builds kiln with CUDA first, inside the deadline.
# --prepare-references DIR: on a CPU machine, over the build that travels (KILN_GPU_BUILD_DIR), the
# correctness steps' CPU losses into DIR, for `--references DIR` on the GPU.
# Environment: KILN_GPU_BUILD_DIR (default build-gpu), KILN_GPU_JOBS (default: all cores),
# KILN_CACHE_DIR (the algorithm search's winners; default OUT_DIR/cache, so each check searches),
# KILN_PARITY_TIMEOUT, KILN_GPU_PEAK_TFLOPS (the bf16 dense peak for MFU; default the device
# model's, 989 for H100 / H200).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
rehearse=0 prebuilt=0 gpu=cuda parity_device=cuda:0 default_build=build-gpu deadline= references= prepare=
while (($#)); do
  case $1 in
    --rehearse) rehearse=1 prebuilt=1 gpu=sim parity_device=sim default_build=build ;;
    --prebuilt) prebuilt=1 ;;
    --deadline) deadline=${2:-}; shift ;;
    --references) references=${2:-}; shift ;;
    --prepare-references) prepare=${2:-}; shift ;;
    -*) echo "gpu_check.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
if [[ -n $deadline && ! $deadline =~ ^[0-9]+$ ]]; then
  echo "gpu_check.sh: --deadline takes whole seconds, not '$deadline'" >&2
  exit 2
fi
((rehearse)) && deadline=${deadline:-1500}
deadline=${deadline:-420}
end=$((SECONDS + deadline))
log_dir=${1:-$root/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
build=${KILN_GPU_BUILD_DIR:-$root/$default_build}
references=${references:-$build/references}
jobs=${KILN_GPU_JOBS:-$(nproc)}
rows=()
failed=0
launch=()    # what train() starts kiln under (train_ranks: mpirun)
step_end=$end  # when the running step's commands are stopped

# Seconds the running step's commands may still run (timeout's argument; at least 1).
limit() {
  local s=$((step_end - SECONDS))
  echo $((s > 0 ? s : 1))
}

# limited COMMAND...: COMMAND stopped when the running step's time is up.
limited() { timeout "$(limit)" "$@"; }

# [cap=SECONDS] [always=1] step NAME COMMAND...: runs COMMAND with its output in NAME.log, stopped at
# the deadline (or after cap seconds), and adds a row (name, state, seconds, result) to steps.tsv.
# Within 5 s of the deadline the step is not run (always=1: the build and the environment record,
# which the report needs, run anyway).
step() {
  local name=$1 start=$SECONDS state=ok
  shift
  if ((end - SECONDS < 5)) && [[ ${always:-0} != 1 ]]; then
    add_row "$name" "not run (deadline)" 0 ""
    return 1
  fi
  step_end=$end
  ((${cap:-0} > 0 && SECONDS + cap < end)) && step_end=$((SECONDS + cap))
  if ! "$@" >"$log_dir/$name.log" 2>&1; then
    if ((SECONDS >= step_end)); then
      state="stopped ($( ((step_end == end)) && echo deadline || echo "cap ${cap}s"))"
    else
      state=FAIL
      failed=$((failed + 1))
    fi
  fi
  add_row "$name" "$state" $((SECONDS - start)) "$(summary "$name")"
  [[ $state == ok ]]
}

add_row() {
  printf '%s\t%s\t%s\t%s\n' "$@" >>"$log_dir/steps.tsv"
  rows+=("$(printf '%-13s %-18s %5ss  %s' "$@")")
}

# What a step's log says in one line: gtest's counts, or the log's last line.
summary() {
  local log=$log_dir/$1.log
  if grep -q '^\[==========\]\|^\[ RUN      \]' "$log"; then
    local passed failed
    passed=$(grep -c '^\[       OK \]' "$log")
    failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$log")
    echo "$passed passed, $((failed / 2)) failed"
  else
    tail -n 1 "$log" | cut -c1-80
  fi
}

configure() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  timeout "$(limit)" cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON &&
    grep -q '^CMAKE_CUDA_COMPILER:FILEPATH=/' "$build/CMakeCache.txt"
}

# The environment: the GPU as nvidia-smi sees it, kiln's devices and libraries, PyTorch's version.
# Ends with the device model the GPU's name picks ("device model: h200", or "none").
record_env() {
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,pstate \
      --format=csv
  else
    echo "nvidia-smi: not on this machine"
  fi
  "$build/kiln" devices --versions || return 1
  python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' \
    2>/dev/null || echo "torch: not importable by python3"
  echo "device model: $device_model"
}

# The performance model that the GPU's name picks (the rehearsal's: h200, the check's sizing).
pick_device_model() {
  ((rehearse)) && { echo h200; return; }
  local name
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  [[ -n $name ]] || name=$("$build/kiln" devices 2>/dev/null | grep -m1 'cuda:0:')
  case $name in
    *H200*) echo h200 ;;
    *H100*) echo h100 ;;
    *A100*) echo a100 ;;
    *) echo none ;;
  esac
}

# The CPU references: REFERENCE_KEY (kiln's version and the command line, paths from the repository
# root) must match the key prepared beside the losses, or the losses are computed again.
reference_key() { echo "$("$build/kiln" --version | head -1) ${*//$root/.}"; }

# cpu_losses NAME OUT ARGS...: the CPU's losses of `kiln train ARGS` into OUT/cpu.losses, from
# --references when they were prepared for this command line.
cpu_losses() {
  local name=$1 out=$2
  shift 2
  if [[ -n $references && -f $references/$name.losses ]] &&
    [[ $(cat "$references/$name.key") == "$(reference_key "$@")" ]]; then
    cp "$references/$name.losses" "$out/cpu.losses"
    echo "CPU losses from $references/$name.losses (prepared beforehand)"
    return
  fi
  KILN_TEST_LOSS_LOG=$out/cpu.losses timeout "$(limit)" "${launch[@]}" "$build/kiln" train "$@" --device cpu \
    --output-dir "$out/cpu" --log-interval 5
}

# train NAME TOLERANCE ARGS...: `kiln train ARGS` for 20 steps on the GPU and on the CPU (same seed,
# fake data, so the same batches and dropout masks); every step's loss (KILN_TEST_LOSS_LOG, exact)
# must agree within TOLERANCE relative. Prints the largest relative difference.
train() {
  local name=$1 tolerance=$2
  shift 2
  local out=$log_dir/$name
  rm -rf "$out" && mkdir -p "$out"
  KILN_TEST_LOSS_LOG=$out/$gpu.losses timeout "$(limit)" "${launch[@]}" "$build/kiln" train "$@" --device "$gpu" \
    --output-dir "$out/$gpu" --log-interval 5 || return 1
  cpu_losses "$name" "$out" "$@" || return 1
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
    KILN_GRAPH=$graph KILN_TEST_LOSS_LOG=$out/graph$graph.losses timeout "$(limit)" "$build/kiln" train "$@" \
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
  KILN_TEST_LOSS_LOG=$out/whole.losses timeout "$(limit)" "$build/kiln" train "$@" --device "$gpu" \
    --output-dir "$out/whole" --log-interval 5 || return 1
  local split=(--device "$gpu" --output-dir "$out/split" --save "$out/ckpt" --load "$out/ckpt" --save-interval 10
    --log-interval 5)
  KILN_TEST_LOSS_LOG=$out/split.losses timeout "$(limit)" "$build/kiln" train "$@" "${split[@]}" --exit-interval 10 ||
    return 1
  KILN_TEST_LOSS_LOG=$out/split.losses timeout "$(limit)" "$build/kiln" train "$@" "${split[@]}" || return 1
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
# the bf16 dense peak.
bench() {
  local name=$1
  shift
  timeout "$(limit)" "$build/kiln" train "$@" --device "$gpu" --bf16 --output-dir "$log_dir/$name-run" \
    --log-interval 1 || return 1
  local line gflops
  line=$(grep -o 'median [0-9.]* ms/step' "$log_dir/$name.log" | tail -1)
  gflops=$(grep -o '[0-9.]* GFLOP/s' "$log_dir/$name.log" | tail -1 | cut -d' ' -f1)
  echo "kiln $line, MFU $(python3 -c "print(f'{100 * $gflops / 1e3 / $peak:.1f}%')")"
}

# profile NAME ARGS...: `kiln train ARGS` on the GPU in bf16 under KILN_PROFILE=1 (on a GPU each op's
# scope synchronises, so the tables hold device time); prints the three op types that take longest.
profile() {
  local name=$1
  shift
  KILN_PROFILE=1 timeout "$(limit)" "$build/kiln" train "$@" --device "$gpu" --bf16 \
    --output-dir "$log_dir/$name-run" --log-interval 1 || return 1
  echo "top: $(grep -A3 '^profile over' "$log_dir/$name.log" | tail -n 3 | awk '{printf "%s %s ms, ", $1, $3}')"
}

# model NAME ARGS...: the performance model's expected step for `kiln train ARGS` in bf16 on the
# device model, as JSON in NAME.json.
model() {
  local name=$1
  shift
  [[ $device_model != none ]] || { echo "no device model for this GPU"; return 0; }
  timeout "$(limit)" "$build/kiln" train "$@" --bf16 --dry-run --device-model "$device_model" --json \
    >"$log_dir/$name.json" || return 1
  python3 - "$log_dir/$name.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"expected {j['step_ms']:.2f} ms/step on {j['device']}, MFU {100 * j['mfu']:.1f}%")
PY
}

# peer NAME SCRIPT ARGS...: the PyTorch step on the same GPU with its profile, where this machine's
# python has torch with CUDA (in a rehearsal: one step on the CPU, where it has torch).
peer() {
  local name=$1 script=$2
  shift 2
  if ((rehearse)); then
    python3 -c 'import torch' 2>/dev/null || { echo "no PyTorch here: peer not run"; return 0; }
    timeout "$(limit)" python3 "$root/bench/$script" --device cpu --dtype bf16 --warmup 1 --steps 1 --profile "$@"
    return
  fi
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "no PyTorch with CUDA here: peer not measured"; return 0; }
  timeout "$(limit)" python3 "$root/bench/$script" --device cuda --dtype bf16 --profile "$@"
}

existing_build() {
  [[ -x $build/kiln && -x $build/kiln_tests ]] || { echo "no kiln and kiln_tests in $build"; return 1; }
  echo "$build"
}

# built: configure and build with CUDA, or take the build that is there (a rehearsal, --prebuilt).
built() {
  if ((prebuilt)); then
    always=1 step build existing_build
  else
    always=1 step configure configure && always=1 step build limited cmake --build "$build" -j "$jobs" --target kiln kiln_tests
  fi
}

# The command lines. The benchmarks' sizes: on a GPU the table's; in a rehearsal the same command
# lines, small. BERT's evaluation that ends a benchmark runs at the training batch (the preset's
# EVAL_BS 96 would not fit a rehearsal).
bert_large_batch=16 resnet50_batch=128 bench_steps=10 profiled_bert=bert-large
((rehearse)) && bert_large_batch=1 resnet50_batch=2 bench_steps=3 profiled_bert=bert-tiny
bert_large=(bert --config "$root/configs/bert-large.toml" --fake-data --seq-length 512 --max-predictions 76
  --global-batch-size "$bert_large_batch" --eval-batch-size "$bert_large_batch")
bert_profiled=(bert --config "$root/configs/$profiled_bert.toml" --fake-data --seq-length 512 --max-predictions 76
  --global-batch-size "$bert_large_batch" --eval-batch-size "$bert_large_batch" --benchmark 3)
resnet50=(resnet --fake-data --batch-size "$resnet50_batch")
bert_tiny=(bert --config "$root/configs/bert-tiny.toml" --fake-data --seq-length 128 --max-predictions 20
  --global-batch-size 32 --train-iters 20 --eval-interval 1000)
resnet_small=(resnet --arch resnet18 --width 32 --fake-data --image-size 64 --eval-resize 64 --batch-size 32
  --benchmark 20)
tp2pp2=("${bert_tiny[@]}" --micro-batch-size 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
  --bf16)

# --prepare-references DIR: the correctness steps' CPU losses and the keys they were computed for.
prepare_references() {
  local name=$1
  shift
  local out=$prepare/$name-run
  rm -rf "$out" && mkdir -p "$out"
  local launch=()
  [[ $name == bert-tp2pp2 ]] && launch=(env KILN_NCCL=0 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4)
  KILN_TEST_LOSS_LOG=$out/cpu.losses "${launch[@]}" "$build/kiln" train "$@" --device cpu --output-dir "$out/cpu" \
    --log-interval 5 >"$prepare/$name.log" 2>&1 || { echo "$name: failed, see $prepare/$name.log"; return 1; }
  mv "$out/cpu.losses" "$prepare/$name.losses" && rm -rf "$out"
  reference_key "$@" >"$prepare/$name.key"
  echo "$name: $(wc -l <"$prepare/$name.losses") CPU losses"
}
if [[ -n $prepare ]]; then
  [[ -x $build/kiln ]] || { echo "gpu_check.sh: no kiln in $build (KILN_GPU_BUILD_DIR)" >&2; exit 1; }
  mkdir -p "$prepare"
  prepare_references bert-tiny "${bert_tiny[@]}" && prepare_references resnet-small "${resnet_small[@]}" &&
    { ! command -v mpirun >/dev/null || prepare_references bert-tp2pp2 "${tp2pp2[@]}"; }
  exit
fi

mkdir -p "$log_dir"
rm -f "$log_dir/steps.tsv"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$log_dir/cache}
device_model=none peak=${KILN_GPU_PEAK_TFLOPS:-989}
if built; then
  device_model=$(pick_device_model)
  [[ $device_model == a100 ]] && peak=${KILN_GPU_PEAK_TFLOPS:-312}
  always=1 step env record_env
  step bert-large bench bert-large "${bert_large[@]}" --benchmark "$bench_steps"
  step torch-bert peer torch-bert bert_torch_peer.py --layers 24 --hidden 1024 --heads 16 --intermediate 4096 \
    --batch "$bert_large_batch" --seq 512 --pred 76
  step bert-large-unfused bench bert-large-unfused "${bert_large[@]}" --benchmark "$bench_steps" \
    --attention-backend unfused
  KILN_FLASH_PRODUCTS=warp step bert-large-warp bench bert-large-warp "${bert_large[@]}" --benchmark "$bench_steps"
  step bert-prof profile bert-prof "${bert_profiled[@]}"
  step model-bert model model-bert "${bert_profiled[@]}"
  step resnet50 bench resnet50 "${resnet50[@]}" --benchmark "$bench_steps"
  step torch-resnet peer torch-resnet resnet_torch_peer.py --batch "$resnet50_batch"
  step resnet-prof profile resnet-prof "${resnet50[@]}" --benchmark 3
  step model-resnet model model-resnet "${resnet50[@]}" --benchmark 3
  step bert-tiny train bert-tiny 1e-3 "${bert_tiny[@]}"
  step resnet-small train resnet-small 1e-3 "${resnet_small[@]}"
  parity_cap=$(((end - SECONDS) / 2))
  ((parity_cap > ${KILN_PARITY_TIMEOUT:-300})) && parity_cap=${KILN_PARITY_TIMEOUT:-300}
  cap=$parity_cap step parity limited env KILN_PARITY_DEVICE="$parity_device" "$build/kiln_tests" --gtest_filter='Parity*'
  step parity-warp limited env KILN_FLASH_PRODUCTS=warp KILN_PARITY_DEVICE="$parity_device" "$build/kiln_tests" \
    --gtest_filter='ParityFlashAttention.*'
  step unit limited "$build/kiln_tests" --gtest_filter='CudaBodies.*:Devices.*:SimDevice.*:AlgoCache.*:OpGraph.*:GraphedRegion.*:NcclOneRank.*'
  step bert-graph graph_same bert-graph "${bert_tiny[@]}" --micro-batch-size 16 --fp16 --initial-loss-scale 1e9 \
    --loss-scale-window 4 --clip-grad 1.0
  step resnet-graph graph_same resnet-graph "${resnet_small[@]}"
  step bert-resume resume bert-resume "${bert_tiny[@]}" --bf16
  step bert-tp2pp2 train_ranks bert-tp2pp2 5e-3 4 "${tp2pp2[@]}"
fi

python3 "$root/tools/gpu_report.py" "$log_dir" --deadline "$deadline" --elapsed "$SECONDS" --peak "$peak" \
  --device-model "$device_model" $( ((rehearse)) && echo --rehearse) || failed=$((failed + 1))
{
  echo
  echo "kiln GPU check$( ((rehearse)) && echo " rehearsal (--device sim)") ($(date -u +%FT%TZ)), ${SECONDS}s of" \
    "a ${deadline}s deadline; report: $log_dir/report.md"
  printf '%-13s %-18s %6s  %s\n' step state time result
  printf '%s\n' "${rows[@]}"
} | tee "$log_dir/summary.txt"
((failed == 0))
