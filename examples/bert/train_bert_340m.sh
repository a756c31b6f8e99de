#!/bin/bash
# Runs the "340M" parameter model (BERT-Large shape, pre-LN) the way Megatron-LM's
# examples/bert/train_bert_340m_distributed.sh does, with kiln: one process, or as many as the
# launcher in LAUNCH starts (train_bert_340m_distributed.sh sets it to mpirun; slurm_bert_340m.sbatch
# runs this script under srun, one task per device).
#
#   examples/bert/train_bert_340m.sh CHECKPOINT_PATH TENSORBOARD_LOGS_PATH VOCAB_FILE DATA_PATH [kiln flags...]
#
# Same positional arguments as Megatron's script. VOCAB_FILE is the WordPiece vocab.txt (Megatron's
# comment says bert-vocab.json; BERT needs the .txt). Extra arguments go to kiln as `--flag value`
# and replace the script's own setting of that flag, e.g. `--train-iters 100 --log-interval 1`
# for a short run. KILN overrides the binary (default build/kiln under the repository root).
#
# --fp16 as in Megatron's script: f16 activations and weight copy, fp32 master weights, Megatron's
# dynamic loss scaler (--initial-loss-scale 2^32, --loss-scale-window 1000, --hysteresis 2); on a
# CPU without f16 arithmetic kiln says so at start and multiplies in f32. Pass --bf16 instead where
# the CPU has bf16 instructions (`kiln cpu`).
# Megatron's script also asks for --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16,
# which its own 8 GPUs cannot hold and 24 layers cannot split into; this one is data parallel over
# the processes started (micro batch 4 per rank; the global batch 32 needs 1, 2, 4 or 8 of them).
# Pass --tensor-model-parallel-size / --pipeline-model-parallel-size to split the model instead.
set -euo pipefail

if [ $# -lt 4 ]; then
  echo "usage: $0 CHECKPOINT_PATH TENSORBOARD_LOGS_PATH VOCAB_FILE DATA_PATH [kiln flags...]" >&2
  exit 2
fi

CHECKPOINT_PATH=$1
TENSORBOARD_LOGS_PATH=$2
VOCAB_FILE=$3
DATA_PATH=$4
shift 4

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KILN=${KILN:-$ROOT/build/kiln}

BERT_MODEL_ARGS=(
    --num-layers 24
    --hidden-size 1024
    --num-attention-heads 16
    --seq-length 512
    --max-position-embeddings 512
    --pre-ln
    --attention-backend auto
)

TRAINING_ARGS=(
    --micro-batch-size 4
    --global-batch-size 32
    --train-iters 1000000
    --weight-decay 1e-2
    --clip-grad 1.0
    --optimizer adamw
    --adam-eps 1e-8
    --lr 0.0001
    --lr-decay-style linear
    --min-lr 1.0e-5
    --lr-decay-iters 990000
    --lr-warmup-fraction .01
    --fp16
)

DATA_ARGS=(
    --data-path "$DATA_PATH"
    --vocab-file "$VOCAB_FILE"
    --split 949,50,1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 100
    --save-interval 10000
    --eval-interval 1000
    --save "$CHECKPOINT_PATH"
    --load "$CHECKPOINT_PATH"
    --eval-iters 10
    --tensorboard-dir "$TENSORBOARD_LOGS_PATH"
)

# Drops from the named array every flag (and its value) that the user passes again.
USER_ARGS=("$@")
drop_overridden() {
  local -n args=$1
  local kept=() i
  for ((i = 0; i < ${#args[@]}; i++)); do
    if [[ ${args[i]} == --* && " ${USER_ARGS[*]} " == *" ${args[i]} "* ]]; then
      if ((i + 1 < ${#args[@]})) && [[ ${args[i + 1]} != --* ]]; then i=$((i + 1)); fi
      continue
    fi
    kept+=("${args[i]}")
  done
  args=("${kept[@]}")
}
for group in BERT_MODEL_ARGS TRAINING_ARGS DATA_ARGS EVAL_AND_LOGGING_ARGS; do
  drop_overridden "$group"
done
# --bf16 (or --fp16) from the user replaces the script's precision.
if [[ " ${USER_ARGS[*]} " == *" --bf16 "* ]]; then
  kept=()
  for a in "${TRAINING_ARGS[@]}"; do [[ $a == --fp16 ]] || kept+=("$a"); done
  TRAINING_ARGS=("${kept[@]}")
fi

# shellcheck disable=SC2086  # LAUNCH is a command line, split into words
exec ${LAUNCH:-} "$KILN" train bert --config "$ROOT/configs/bert-340m.toml" \
    "${BERT_MODEL_ARGS[@]}" \
    "${TRAINING_ARGS[@]}" \
    "${DATA_ARGS[@]}" \
    "${EVAL_AND_LOGGING_ARGS[@]}" \
    "$@"
