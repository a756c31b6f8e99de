// train/config/ddp_config.h — how data-parallel gradients are reduced, shared by every recipe:
// `--overlap-grad-reduce` (Megatron; TOML parallel.overlap_grad_reduce) reduces them in buckets
// during the last micro-batch's backward (train/grad_buckets.h); `--ddp-bucket-size N`
// (parallel.ddp_bucket_size) sets a bucket's elements, 0 meaning Megatron's max(40M, 1M x DP).
// Without overlap, one all-reduce of every gradient follows the backward.
#pragma once
#include <cstdint>

#include "kiln/train/config/config_registry.h"

namespace kiln::train {

struct DdpConfig {
  bool overlap_grad_reduce = false;
  int64_t bucket_size = 0;  // elements; 0: default_bucket_elements(DP)
};

void register_ddp_config(ConfigRegistry& r, DdpConfig& c);
// Throws kiln::Error for a negative bucket size.
void check_ddp_config(const DdpConfig& c);

}  // namespace kiln::train
