// train/dry_run/resnet_dry_run.h — `kiln train resnet --dry-run`: what a ResNet configuration costs per
// rank, without allocating it: parameters, the tensors a step holds (models/resnet_footprint.h)
// and FLOPs per step.
//
// Weights, gradients, optimizer: fp32 master weight + fp32 gradient + LARS momentum = 12 bytes
// per element of the parameter store (16-element aligned offsets), plus the compute copy in
// bf16 / f16 (2 bytes); with the distributed optimizer the momentum is this rank's shard.
// Tensors peak (the console's "tensors ... (peak ...)"): those, the layers' saved activations and
// gradient buffers, and the largest convolution's scratch. Not counted: buffers growing during the
// first step (the old one is freed once the layers drop it; about 1%) and, with the distributed
// optimizer, the whole optimizer state gathered while a checkpoint is written.
// FLOPs per step: 3 x the forward's (backward-data and backward-weights each cost a forward)
// x the global batch; BN, ReLU, pooling and additions not counted.
#pragma once
#include <cstdint>

#include "kiln/core/dtype.h"
#include "kiln/models/resnet.h"
#include "kiln/train/dry_run/dry_run.h"

namespace kiln::train {

// `batch` and `eval_batch` per rank; the global batch is batch x dp. Throws kiln::Error for a
// size < 1, naming it.
DryRunReport resnet_dry_run(const models::ResNetConfig& config, const std::string& arch, int64_t image,
                            int64_t batch, int64_t eval_batch, int dp, bool distributed_optimizer, DType compute,
                            bool split_master = false);

}  // namespace kiln::train
