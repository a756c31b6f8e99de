#!/bin/bash
# The "340M" BERT (examples/bert/train_bert_340m.sh) on GPUS_PER_NODE processes of this machine
# under mpirun, as Megatron-LM's train_bert_340m_distributed.sh runs torchrun with 8 GPUs a node:
#
#   GPUS_PER_NODE=8 examples/bert/train_bert_340m_distributed.sh CHECKPOINT_PATH TENSORBOARD_LOGS_PATH \
#       VOCAB_FILE DATA_PATH [kiln flags...]
#
# MPIRUN_ARGS adds mpirun options (e.g. "--hostfile hosts" for several machines, where
# GPUS_PER_NODE is then the processes in all). Each rank gets its share of the cores (kiln pins
# ranks that the launcher left unbound); the global batch 32 is split over the ranks.
set -euo pipefail
NPROC=${GPUS_PER_NODE:-8}
root_flags=()
if [ "$(id -u)" = 0 ]; then root_flags=(--allow-run-as-root); fi
# shellcheck disable=SC2206  # MPIRUN_ARGS is a list of words
LAUNCH="mpirun -np $NPROC --bind-to none ${root_flags[*]} ${MPIRUN_ARGS:-}" \
  exec "$(dirname "$0")/train_bert_340m.sh" "$@"
