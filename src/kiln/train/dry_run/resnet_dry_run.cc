#include "kiln/train/dry_run/resnet_dry_run.h"

#include <fmt/format.h>

#include "kiln/models/resnet_footprint.h"

namespace kiln::train {

DryRunReport resnet_dry_run(const models::ResNetConfig& config, const std::string& arch, int64_t image,
                            int64_t batch, int64_t eval_batch, int dp, bool distributed_optimizer, DType compute,
                            bool split_master) {
  require_positive(image, "image size");
  require_positive(batch, "batch size per rank");
  require_positive(eval_batch, "evaluation batch size per rank");
  require_positive(dp, "data parallel size");
  const models::ResNetFootprint f = models::resnet_footprint(config, batch, eval_batch, image, compute);
  const bool low = compute != DType::f32;
  const double state_bytes = distributed_optimizer && dp > 1 ? 4.0 / dp : 4.0,
               bytes_per_param = 8.0 + state_bytes + (low && !split_master ? double(dtype_size(compute)) : 0.0);
  DryRunReport r;
  r.parameters = r.parameters_per_rank = f.parameters;
  r.bytes_per_rank_weights_grads_optimizer = double(f.store_elements) * bytes_per_param;
  r.bytes_activations_per_microbatch = f.saved + f.gradients + f.scratch;
  r.bytes_tensors_peak = r.bytes_per_rank_weights_grads_optimizer + r.bytes_activations_per_microbatch;
  r.flops_per_step = 3.0 * double(f.flops_per_image) * double(batch * dp);

  const std::string dtype(dtype_name(compute));
  std::string& x = r.text;
  x += fmt::format("dry run: {} ({} classes{}), {}x{} images\n", arch, config.num_classes,
                   config.small_images ? ", small-image stem" : "", image, image);
  x += fmt::format("  layout: DP {}; batch {} per rank, global batch {}; evaluation batch {} per rank\n", dp,
                   batch, batch * dp, eval_batch);
  x += fmt::format("  parameters: {} ({})\n", f.parameters, millions_or_billions(f.parameters));
  x += fmt::format("  memory per rank: weights + grads + LARS {} ({:g} bytes/param: {}fp32 master, grad, momentum{})\n",
                   gib(r.bytes_per_rank_weights_grads_optimizer), bytes_per_param,
                   split_master ? "bf16 copy + low halves = " : low ? dtype + " copy, " : "",
                   distributed_optimizer && dp > 1 ? " shard" : "");
  x += fmt::format("                   saved activations {} ({}), gradients {} (buffers shared by the layers), "
                   "convolution scratch {}\n", gib(f.saved), dtype, gib(f.gradients), gib(f.scratch));
  x += fmt::format("  tensors peak per rank (estimate; the console reports the measured 'tensors ... "
                   "(peak ...)'): {}\n", gib(r.bytes_tensors_peak));
  x += fmt::format("  FLOPs per step: {:.3e} (3 x {:.3e} per image forward, x the global batch)\n",
                   r.flops_per_step, double(f.flops_per_image));
  return r;
}

}  // namespace kiln::train
