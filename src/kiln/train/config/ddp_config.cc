#include "kiln/train/config/ddp_config.h"

#include "kiln/core/error.h"

namespace kiln::train {

void register_ddp_config(ConfigRegistry& r, DdpConfig& c) {
  r.add_bool("parallel.overlap_grad_reduce", &c.overlap_grad_reduce, "", {"--overlap-grad-reduce"},
             "reduce data-parallel gradients in buckets during backward");
  r.add_int("parallel.ddp_bucket_size", &c.bucket_size, "", {"--ddp-bucket-size"},
            "gradient elements per bucket with --overlap-grad-reduce (0: max(40M, 1M x DP))");
}

void check_ddp_config(const DdpConfig& c) {
  if (c.bucket_size < 0) throw Error("config: parallel.ddp_bucket_size must be >= 0, got {}", c.bucket_size);
}

}  // namespace kiln::train
