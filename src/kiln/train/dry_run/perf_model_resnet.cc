// resnet_step_model (train/dry_run/perf_model.h): a ResNet step on one data-parallel rank, op for op as
// models/resnet.cc runs it: stem, blocks (each conv's batch norm with its ReLU, the last one with the
// shortcut join), head in f32, loss, backward in reverse, LARS. Where kiln's CUDA backend does more
// than this counts today (issue 47): f16 weight gradients (and bf16 ones where cuDNN has no
// deterministic bf16 algorithm) run on f32 copies of both operands (TF32), and batch-norm sums make
// more passes.
#include <fmt/format.h>

#include <algorithm>

#include "kiln/models/resnet_footprint.h"
#include "kiln/nn/conv2d.h"
#include "kiln/nn/pool.h"
#include "kiln/train/dry_run/dry_run.h"
#include "kiln/train/dry_run/perf_ops.h"

namespace kiln::train {
namespace {

using perf::dims;

// f32 operations per element: batch norm forward (statistics, normalisation, ReLU) and backward.
constexpr double kBnFlops = 7, kBnBackwardFlops = 10;

// The walk over the network, forward ops in order and each layer's backward ops in a group; the
// groups run in reverse.
class Walk {
 public:
  explicit Walk(const ResNetPerfRun& r)
      : N_(r.batch), dt_(r.compute), e_(double(dtype_size(r.compute))), math_(perf::matmul_math(r.compute)) {}

  // conv -> batch norm (+ shortcut join) (+ ReLU) on the current activation (N, H, W, C).
  void conv_bn(const std::string& conv, const std::string& bn, const nn::Conv2dOptions& o, bool relu, bool join,
               bool need_dx = true);
  void max_pool();
  void head(int64_t classes);
  // Forward: the f32 images cast to the compute dtype (not in f32).
  void cast_images();
  // Backward: the first block's shortcut gradient added to its main one, before the max-pool's.
  void shortcut_add();
  // Backward of a block's join: dx = (dy [+ the next block's shortcut gradient]) where y > 0.
  void join(const std::string& prefix, bool shortcut_grad);

  std::vector<OpCost> fwd;
  std::vector<std::vector<OpCost>> bwd;
  int64_t H = 0, W = 0, C = 0;

 private:
  OpCost conv_op(std::string name, const std::string& shape, double flops, double bytes) const {
    OpCost op = perf::rows(std::move(name), OpClass::gemm, 1, shape, flops, bytes);
    op.math = math_;
    op.model_flops = true;
    return op;
  }
  std::string act(int64_t h, int64_t w, int64_t c) const { return dims({N_, h, w, c}, dt_); }

  int64_t N_;
  DType dt_;
  double e_;
  Math math_;
};

void Walk::conv_bn(const std::string& conv, const std::string& bn, const nn::Conv2dOptions& o, bool relu, bool join,
                   bool need_dx) {
  const ops::ConvShape s = nn::conv2d_shape(o, N_, H, W);
  const double x = double(N_ * H * W * o.in), y = double(N_ * s.P() * s.Q() * o.out),
               w = double(o.out * o.in / o.groups * o.kernel * o.kernel), flops = 2.0 * y * (w / double(o.out));
  const std::string shape = fmt::format("{} -> {}, {}x{}/{}", act(H, W, o.in), act(s.P(), s.Q(), o.out), o.kernel,
                                        o.kernel, o.stride);
  // y = conv(x, w); dx = conv^T(dy, w); dw (f32) = x * dy.
  fwd.push_back(conv_op(conv + ".forward", shape, flops, (x + w + y) * e_));
  // x read twice (statistics, then normalisation), the shortcut read, y written; the sums' partials.
  const int64_t rows = N_ * s.P() * s.Q();
  fwd.push_back(perf::rows(bn + ".forward", OpClass::norm, 1, act(s.P(), s.Q(), o.out) + (join ? " + shortcut" : ""),
                           y * kBnFlops,
                           y * e_ * (3 + (join ? 1 : 0)) + double(o.out) * 16 + perf::bn_sum_partials(rows, o.out)));
  std::vector<OpCost> back;
  // Sums of dy and dy (x - mean) over x, dy (and y for the ReLU mask), then dx from them: two passes.
  back.push_back(perf::rows(bn + ".backward", OpClass::norm, 1, act(s.P(), s.Q(), o.out), y * kBnBackwardFlops,
                            y * e_ * (5 + (relu ? 2 : 0)) + double(o.out) * 24 + perf::bn_sum_partials(rows, o.out)));
  // bf16: cuDNN writes dw in bf16, widened into the f32 gradient (read, written) by a second pass.
  const double dw_bytes = e_ == 2 ? w * (2 + 2 + 4) : w * 4;
  back.push_back(conv_op(conv + ".backward_weights", shape, flops, (x + y) * e_ + dw_bytes));
  if (need_dx) back.push_back(conv_op(conv + ".backward_data", shape, flops, (y + w + x) * e_));
  bwd.push_back(std::move(back));
  H = s.P(), W = s.Q(), C = o.out;
}

void Walk::max_pool() {
  const nn::MaxPool2d pool;  // the model's: 3x3, stride 2, padding 1
  const int64_t P = pool.out_size(H), Q = pool.out_size(W);
  const double x = double(N_ * H * W * C), y = double(N_ * P * Q * C);
  // y and the i32 argmax written; backward routes dy by the argmax into dx.
  fwd.push_back(perf::rows("maxpool.forward", OpClass::elementwise, 1, act(P, Q, C), y * 9, x * e_ + y * (e_ + 4)));
  bwd.push_back({perf::rows("maxpool.backward", OpClass::elementwise, 1, act(H, W, C), y, y * (e_ + 4) + x * e_)});
  H = P, W = Q;
}

void Walk::cast_images() {
  if (dt_ == DType::f32) return;
  const double n = double(N_ * H * W * C);
  fwd.push_back(perf::rows("images.cast", OpClass::elementwise, 1, act(H, W, C), n, n * (4 + e_)));
}

void Walk::shortcut_add() {
  const double n = double(N_ * H * W * C);
  bwd.push_back({perf::rows("layer1.0.shortcut_grad_add", OpClass::elementwise, 1, act(H, W, C), n, 3 * n * e_)});
}

void Walk::join(const std::string& prefix, bool shortcut_grad) {
  const double n = double(N_ * H * W * C);
  bwd.push_back({perf::rows(prefix + ".relu.backward", OpClass::elementwise, 1,
                            act(H, W, C) + (shortcut_grad ? " + shortcut grad" : ""), n * (shortcut_grad ? 2 : 1),
                            n * e_ * (shortcut_grad ? 4 : 3))});
}

// Global average pool into f32 features, fc (f32: the head stays in f32), softmax cross-entropy.
void Walk::head(int64_t classes) {
  const double x = double(N_ * H * W * C), f = double(N_ * C), logits = double(N_ * classes);
  fwd.push_back(perf::rows("avgpool.forward", OpClass::elementwise, 1, act(H, W, C), x, x * e_ + f * 4));
  fwd.push_back(perf::gemm("fc.forward", OpClass::gemm, 1,
                           {.M = N_, .N = classes, .K = C, .ea = 4, .eb = 4, .ec = 4, .bias = classes, .ebias = 4,
                            .math = Math::fp32}));
  fwd.push_back(perf::rows("loss.forward", OpClass::loss, 1, dims({N_, classes}, DType::f32), logits * 4,
                           logits * 4 + double(N_) * 8));
  std::vector<OpCost> back;
  back.push_back(perf::rows("loss.backward", OpClass::loss, 1, dims({N_, classes}, DType::f32), logits * 3,
                            logits * 8 + double(N_) * 8));
  back.push_back(perf::gemm("fc.backward_weights", OpClass::gemm, 1,
                            {.M = classes, .N = C, .K = N_, .ea = 4, .eb = 4, .ec = 4, .math = Math::fp32}));
  back.push_back(perf::bias_grad_epilogue("fc.bias_grad", 1, dims({N_, classes}, DType::f32), N_, classes));
  back.push_back(perf::gemm("fc.backward_data", OpClass::gemm, 1,
                            {.M = N_, .N = C, .K = classes, .ea = 4, .eb = 4, .ec = 4, .math = Math::fp32}));
  back.push_back(perf::rows("avgpool.backward", OpClass::elementwise, 1, act(H, W, C), x, f * 4 + x * e_));
  bwd.push_back(std::move(back));
}

// A block: the downsample path (forward runs it first, backward last), its convs and batch norms,
// and the join's backward.
void block(Walk& walk, const models::ResNetConfig& c, const std::string& prefix, int64_t width, int64_t stride,
           bool last_block) {
  const int64_t in = walk.C, H = walk.H, W = walk.W, out = width * c.expansion();
  if (stride != 1 || in != out) {
    walk.conv_bn(prefix + ".downsample.0", prefix + ".downsample.1", {in, out, 1, stride, 0}, false, false);
    walk.H = H, walk.W = W, walk.C = in;
  }
  const std::vector<nn::Conv2dOptions> convs = models::resnet_block_convs(c, in, width, stride);
  for (size_t i = 0; i < convs.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    walk.conv_bn(prefix + ".conv" + n, prefix + ".bn" + n, convs[i], i + 1 < convs.size(), i + 1 == convs.size());
  }
  walk.join(prefix, !last_block);
}

std::vector<OpCost> optimizer(const ResNetPerfRun& r, double params) {
  const double shard = r.distributed_optimizer ? params / r.dp : params;
  const double copy = r.compute == DType::f32 ? 0 : double(dtype_size(r.compute));
  const std::string all = dims({int64_t(params)}, DType::f32), part = dims({int64_t(shard)}, DType::f32);
  std::vector<OpCost> ops;
  if (r.loss_scaling) ops.push_back(perf::rows("optimizer.unscale", OpClass::optimizer, 1, all, params, 8 * params));
  ops.push_back(perf::rows("optimizer.grad_norm", OpClass::optimizer, 1, all, 2 * params, 4 * params));
  // optim/lars.cc: g *= the clipping factor; (Σ w², Σ g²) per parameter; then w, g, v read, v and w
  // (and the compute copy) written.
  ops.push_back(perf::rows("optimizer.lars_scale_grads", OpClass::optimizer, 1, part, shard, 8 * shard));
  ops.push_back(perf::rows("optimizer.lars_norms", OpClass::optimizer, 1, part, 4 * shard, 8 * shard));
  ops.push_back(perf::rows("optimizer.lars_update", OpClass::optimizer, 1, part, 8 * shard, (20 + copy) * shard));
  return ops;
}

Walk walk_network(const ResNetPerfRun& r) {
  const models::ResNetConfig& c = r.model;
  Walk walk(r);
  walk.H = walk.W = r.image, walk.C = c.in_channels;
  walk.cast_images();
  walk.conv_bn("conv1", "bn1", models::resnet_stem_conv(c), true, false, /*need_dx=*/false);
  if (!c.small_images) walk.max_pool();
  walk.shortcut_add();
  int64_t blocks = 0, block_index = 0;
  for (int64_t d : c.depths) blocks += d;
  for (size_t stage = 0; stage < c.depths.size(); ++stage)
    for (int64_t b = 0; b < c.depths[stage]; ++b, ++block_index)
      block(walk, c, "layer" + std::to_string(stage + 1) + "." + std::to_string(b), c.widths[stage],
            stage > 0 && b == 0 ? 2 : 1, block_index + 1 == blocks);
  walk.head(c.num_classes);
  return walk;
}

}  // namespace

StepModel resnet_step_model(const ResNetPerfRun& r, const DeviceModel& device) {
  require_positive(r.image, "image size");
  require_positive(r.batch, "batch size per rank");
  require_positive(r.dp, "data parallel size");
  Walk walk = walk_network(r);
  StepModel step;
  step.ops = std::move(walk.fwd);
  for (auto group = walk.bwd.rbegin(); group != walk.bwd.rend(); ++group)
    step.ops.insert(step.ops.end(), group->begin(), group->end());
  for (const OpCost& op : step.ops)
    if (op.model_flops) step.model_flops += op.calls * op.flops * r.dp;
  const double params = double(models::resnet_footprint(r.model, r.batch, r.batch, r.image, r.compute).store_elements);
  for (const OpCost& op : optimizer(r, params)) step.ops.push_back(op);
  perf::data_parallel(step.ops, params, r.dp, r.distributed_optimizer, r.dp > device.node_gpus);
  apply_roofline(step.ops, device);
  step.samples = r.batch * r.dp;
  step.world = r.dp;
  step.mfu_math = perf::matmul_math(r.compute);
  step.notes.push_back(fmt::format("per rank: DP {}, batch {} per rank; convolutions and batch norms as kiln runs "
                                   "them today, the head in f32",
                                   r.dp, r.batch));
  if (r.dp > 1)
    step.notes.push_back(fmt::format("gradient all-reduce: ring over {} at {:.0f} GB/s per direction, not overlapped "
                                     "with backward: a lower bound",
                                     r.dp > device.node_gpus ? "the network" : "NVLink",
                                     (r.dp > device.node_gpus ? device.network : device.nvlink) / 1e9));
  return step;
}

}  // namespace kiln::train
