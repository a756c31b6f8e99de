#include "kiln/models/resnet.h"

#include <cmath>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/core/hd.h"
#include "kiln/core/init.h"
#include "kiln/core/philox.h"
#include "kiln/dist/communicator.h"

namespace kiln::models {

ResNetConfig ResNetConfig::resnet18(int64_t num_classes) {
  ResNetConfig c;
  c.block = ResNetBlock::basic;
  c.depths = {2, 2, 2, 2};
  c.num_classes = num_classes;
  return c;
}

ResNetConfig ResNetConfig::resnet34(int64_t num_classes) {
  ResNetConfig c = resnet18(num_classes);
  c.depths = {3, 4, 6, 3};
  return c;
}

ResNetConfig ResNetConfig::resnet50(int64_t num_classes) {
  ResNetConfig c;
  c.num_classes = num_classes;
  return c;
}

ResNetConfig ResNetConfig::resnet101(int64_t num_classes) {
  ResNetConfig c = resnet50(num_classes);
  c.depths = {3, 4, 23, 3};
  return c;
}

nn::Conv2dOptions resnet_stem_conv(const ResNetConfig& c) {
  return c.small_images ? nn::Conv2dOptions{c.in_channels, c.stem_width, 3, 1, 1}
                        : nn::Conv2dOptions{c.in_channels, c.stem_width, 7, 2, 3};
}

std::vector<nn::Conv2dOptions> resnet_block_convs(const ResNetConfig& c, int64_t in, int64_t width, int64_t stride) {
  // (in, out, kernel, stride, padding) of each conv; v1.5 puts the stride on the 3x3.
  const int64_t out = width * c.expansion();
  if (c.block == ResNetBlock::bottleneck)
    return {{in, width, 1, 1, 0}, {width, width, 3, stride, 1}, {width, out, 1, 1, 0}};
  return {{in, width, 3, stride, 1}, {width, out, 3, 1, 1}};
}

// The gradient at a block's input in its two parts, main path and shortcut (undefined: none),
// which the block before adds in its join's ReLU backward rather than in a pass of their own.
struct BlockGrad {
  Tensor main, shortcut;
};

// One residual block: convs[i] -> bns[i] (ReLU fused into all but the last), plus the shortcut;
// the last batch norm adds the shortcut and applies the join's ReLU in its own pass.
class ResNet::Block {
 public:
  // `grads`: the network's shared gradient buffers; `parity`: the block's index mod 2 (the block
  // before reads this one's join gradient while writing its own).
  Block(ParamStore& store, const std::string& prefix, const ResNetConfig& c, int64_t in,
        int64_t width, int64_t stride, ResNetGradBuffers& grads, int parity)
      : join_grad_(grads.join[parity]) {
    const int64_t out = width * c.expansion();
    const std::vector<nn::Conv2dOptions> opts = resnet_block_convs(c, in, width, stride);
    convs.reserve(opts.size());
    bns.reserve(opts.size());
    for (size_t i = 0; i < opts.size(); ++i) {
      const std::string n = std::to_string(i + 1);
      convs.emplace_back(store, prefix + ".conv" + n, opts[i]);
      bns.emplace_back(store, prefix + ".bn" + n, opts[i].out, i + 1 < opts.size(), c.bn_eps,
                       c.bn_momentum);
      convs.back().use_grad_buffer(grads.conv_dx);
      bns.back().use_grad_buffer(grads.bn_dx);
    }
    if (stride != 1 || in != out) {
      ds_conv.emplace(store, prefix + ".downsample.0", nn::Conv2dOptions{in, out, 1, stride, 0});
      ds_bn.emplace(store, prefix + ".downsample.1", out, false, c.bn_eps, c.bn_momentum);
      ds_conv->use_grad_buffer(grads.shortcut_dx);
      ds_bn->use_grad_buffer(grads.bn_dx);
    }
  }

  // x: (N, H, W, in) -> (N, H', W', out).
  Tensor forward(const Step& step, const Tensor& x) {
    const Tensor shortcut = ds_conv ? ds_bn->forward(step, ds_conv->forward(step, x)) : x;
    Tensor h = x;
    const size_t last = convs.size() - 1;
    for (size_t i = 0; i < last; ++i) h = bns[i].forward(step, convs[i].forward(step, h));
    out_ = bns[last].forward_join(step, convs[last].forward(step, h), shortcut);
    return out_;
  }

  BlockGrad backward(const Step& step, const BlockGrad& dy) {
    // The gradient at the join, through the final ReLU; kept until the block before has read it.
    Tensor d = join_grad_.get(*step.ctx, dy.main.shape, dy.main.dtype);
    ops::relu_backward(*step.ctx, out_, dy.main, d, dy.shortcut);
    Tensor dmain = d;
    for (size_t i = convs.size(); i-- > 0;)
      dmain = convs[i].backward(step, bns[i].backward(step, dmain));
    return {dmain, ds_conv ? ds_conv->backward(step, ds_bn->backward(step, d)) : d};
  }

  // Forward FLOPs for an (H, W) input; updates H, W to the output size.
  int64_t flops(int64_t& H, int64_t& W) const {
    int64_t f = ds_conv ? ds_conv->flops(H, W) : 0;
    for (const nn::Conv2d& conv : convs) {
      f += conv.flops(H, W);
      const ops::ConvShape s = conv.shape(1, H, W);
      H = s.P();
      W = s.Q();
    }
    return f;
  }

  std::vector<nn::Conv2d> convs;
  std::vector<nn::BatchNorm2d> bns;
  std::optional<nn::Conv2d> ds_conv;
  std::optional<nn::BatchNorm2d> ds_bn;

 private:
  Tensor out_;  // the block's output: the last batch norm's
  nn::Buffer& join_grad_;
};

ResNet::ResNet(const ResNetConfig& config, ParamStore& store, Context& ctx)
    : config_(config),
      store_(store),
      conv1_(store, "conv1", resnet_stem_conv(config)),
      bn1_(store, "bn1", config.stem_width, true, config.bn_eps, config.bn_momentum) {
  KILN_CHECK(!store.allocated(), "ResNet: the parameter store is already allocated");
  KILN_CHECK(!config.depths.empty() && config.depths.size() == config.widths.size(),
             "ResNet: {} depths for {} widths", config.depths.size(), config.widths.size());
  if (!config.small_images) maxpool_.emplace(3, 2, 1);
  int64_t in = config.stem_width;
  for (size_t stage = 0; stage < config.depths.size(); ++stage) {
    KILN_CHECK(config.depths[stage] > 0 && config.widths[stage] > 0,
               "ResNet: stage {} has depth {} and width {}", stage + 1, config.depths[stage],
               config.widths[stage]);
    for (int64_t b = 0; b < config.depths[stage]; ++b) {
      const int64_t stride = stage > 0 && b == 0 ? 2 : 1;
      const std::string prefix = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      block_offsets_.push_back(store.size());
      blocks_.push_back(std::make_unique<Block>(store, prefix, config, in, config.widths[stage], stride,
                                                grads_, int(blocks_.size() % 2)));
      in = config.widths[stage] * config.expansion();
    }
  }
  bn1_.use_grad_buffer(grads_.bn_dx);
  if (maxpool_) maxpool_->use_grad_buffer(grads_.shortcut_dx);
  avgpool_.use_grad_buffer(grads_.conv_dx);
  fc_offset_ = store.size();
  fc_.emplace(store, "fc", in, config.num_classes, true);
  store.allocate(ctx);
  init(0);
}

ResNet::~ResNet() = default;

void ResNet::init(uint64_t seed) {
  const auto& specs = store_.specs();
  auto stream = [&](const Param& p) { return init_rng(seed, p.spec().name); };
  const bool mlperf = config_.init == ResNetInit::mlperf;
  auto init_conv = [&](const nn::Conv2d& conv) {
    const ParamSpec& s = specs[size_t(conv.weight.id)];
    float* w = conv.weight.w();
    if (mlperf) {
      const double fan_in = double(s.shape[1] * s.shape[2] * s.shape[3]);
      const float std = float(std::sqrt(2.0 / fan_in) / 0.87962566103423978);
#pragma omp parallel for schedule(static) if (s.numel > 65536)
      for (int64_t i = 0; i < s.numel; ++i) w[i] = std * truncated_normal(seed, s.name, uint64_t(i));
      return;
    }
    const double fan_out = double(s.shape[0] * s.shape[2] * s.shape[3]);
    const float std = float(std::sqrt(2.0 / fan_out));
    const RngStream rng = stream(conv.weight);
#pragma omp parallel for schedule(static) if (s.numel > 65536)
    for (int64_t i = 0; i < s.numel; ++i) w[i] = std * rng.normal(uint64_t(i));
  };
  init_conv(conv1_);
  bn1_.reset();
  for (auto& block : blocks_) {
    for (size_t i = 0; i < block->convs.size(); ++i) {
      init_conv(block->convs[i]);
      const bool last = i + 1 == block->convs.size();
      block->bns[i].reset(last && config_.zero_init_residual ? 0.0f : 1.0f);
    }
    if (block->ds_conv) {
      init_conv(*block->ds_conv);
      block->ds_bn->reset();
    }
  }
  if (mlperf) {
    const RngStream rng = stream(fc_->weight);
    for (int64_t i = 0; i < fc_->weight.numel(); ++i) fc_->weight.w()[i] = 0.01f * rng.normal(uint64_t(i));
    std::fill(fc_->bias.w(), fc_->bias.w() + fc_->bias.numel(), 0.0f);
    return;
  }
  const float bound = float(1.0 / std::sqrt(double(fc_->in)));
  for (const Param& p : {fc_->weight, fc_->bias}) {
    const RngStream rng = stream(p);
    for (int64_t i = 0; i < p.numel(); ++i)
      p.w()[i] = bound * (2.0f * rng.uniform(uint64_t(i)) - 1.0f);
  }
}

Tensor ResNet::stage_images(const Step& step, const float* images_nhwc, int64_t N, int64_t H, int64_t W) {
  return images_in_.input(*step.ctx, Tensor::view(const_cast<float*>(images_nhwc), {N, H, W, config_.in_channels}));
}

Tensor ResNet::forward(const Step& step, const float* images_nhwc, int64_t N, int64_t H,
                       int64_t W) {
  const Tensor images = stage_images(step, images_nhwc, N, H, W);
  const auto body = [&] { return body_forward(step, images); };
  if (!graphable_) return body();
  const nn::GraphedRegion::Key key = {int64_t(images.data), N, H, W, int64_t(step.compute_dtype), step.training};
  return forward_graph_.run(step, key, nullptr, body);
}

Tensor ResNet::body_forward(const Step& step, Tensor images) {
  if (step.compute_dtype != DType::f32) {
    Tensor low = images_.get(*step.ctx, images.shape, step.compute_dtype);
    ops::cast(*step.ctx, images, low);
    images = low;
  }
  Tensor h = bn1_.forward(step, conv1_.forward(step, images));
  if (maxpool_) h = maxpool_->forward(step, h);
  for (auto& block : blocks_) h = block->forward(step, h);
  return fc_->forward(step, avgpool_.forward(step, h));  // (N, classes)
}

void ResNet::backward(const Step& step, const Tensor& dlogits) {
  const auto body = [&] {
    body_backward(step, dlogits);
    return Tensor{};
  };
  // Gradient buckets start their reductions in between.
  if (step.grad_watch || !graphable_) body();
  else backward_graph_.run(step, {int64_t(dlogits.data), dlogits.dim(0)}, &store_, body);
}

void ResNet::forward_backward(const Step& step, const float* images_nhwc, int64_t N, int64_t H, int64_t W,
                              const int32_t* labels, nn::SoftmaxCrossEntropy& loss, float loss_scale) {
  if (!graphable_ || !step.capture_regions || step.grad_watch) {  // the network's own graphs, if any
    const Tensor logits = forward(step, images_nhwc, N, H, W);
    loss.stage(*step.ctx, labels, N);
    loss.forward(logits);
    backward(step, loss.backward(loss_scale));
  } else {
    micro_batch_graph(step, stage_images(step, images_nhwc, N, H, W), labels, loss, loss_scale);
  }
}

void ResNet::micro_batch_graph(const Step& step, const Tensor& images, const int32_t* labels,
                               nn::SoftmaxCrossEntropy& loss, float loss_scale) {
  const int64_t N = images.dim(0), H = images.dim(1), W = images.dim(2);
  loss.stage(*step.ctx, labels, N);
  Step inner = step;
  inner.capture_regions = false;  // no graphs inside this one
  const nn::GraphedRegion::Key key = {N, H, W, int64_t(step.compute_dtype), int64_t(f32_bits(loss_scale)),
                                      step.training};
  micro_batch_.run(step, key, &store_, [&] {
    loss.forward(body_forward(inner, images));
    body_backward(inner, loss.backward(loss_scale));
    return Tensor{};
  });
}

void ResNet::body_backward(const Step& step, const Tensor& dlogits) {
  BlockGrad g{avgpool_.backward(step, fc_->backward(step, dlogits)), Tensor{}};
  step.grads_final_from(fc_offset_);
  for (size_t i = blocks_.size(); i-- > 0;) {
    g = blocks_[i]->backward(step, g);
    step.grads_final_from(block_offsets_[i]);
  }
  Tensor d = g.main;  // the first block's conv1 buffer: the stem's gradient, whole
  ops::residual_add(*step.ctx, g.shortcut, d);
  if (maxpool_) d = maxpool_->backward(step, d);
  conv1_.backward(step, bn1_.backward(step, d), /*need_dx=*/false);
}

void ResNet::to_device(Context& ctx) {
  store_.to_device(ctx);
  for (nn::BatchNorm2d* bn : batchnorms()) bn->to_device(ctx);
}

std::vector<nn::BatchNorm2d*> ResNet::batchnorms() {
  std::vector<nn::BatchNorm2d*> out = {&bn1_};
  for (auto& block : blocks_) {
    for (auto& bn : block->bns) out.push_back(&bn);
    if (block->ds_bn) out.push_back(&*block->ds_bn);
  }
  return out;
}

nn::NamedBuffers ResNet::buffers() {
  nn::NamedBuffers out;
  for (nn::BatchNorm2d* bn : batchnorms())
    for (auto& b : bn->buffers()) out.push_back(b);
  return out;
}

void ResNet::set_sync_bn(dist::Communicator* comm) {
  for (nn::BatchNorm2d* bn : batchnorms()) bn->set_sync(comm);
  graphable_ = !comm || comm->size() == 1 || comm->can_capture();
}

int64_t ResNet::flops_per_image(int64_t H, int64_t W) const {
  int64_t f = conv1_.flops(H, W);
  const ops::ConvShape s = conv1_.shape(1, H, W);
  H = s.P();
  W = s.Q();
  if (maxpool_) {
    H = maxpool_->out_size(H);
    W = maxpool_->out_size(W);
  }
  for (const auto& block : blocks_) f += block->flops(H, W);
  return f + 2 * fc_->in * fc_->out;
}

}  // namespace kiln::models
