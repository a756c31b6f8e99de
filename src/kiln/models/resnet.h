// models/resnet.h — ResNet v1.5 (torchvision layout and parameter names) over NHWC images.
//
// Stem:    conv1 7x7/2 p3 -> bn1 -> ReLU -> maxpool 3x3/2 p1            (ImageNet)
//          conv1 3x3/1 p1 -> bn1 -> ReLU                                (small_images: 28..64 px)
// Stages:  layer1..layerN, depths[i] blocks of width widths[i]; stage i > 0 starts with stride 2.
//   Bottleneck (expansion 4): conv1 1x1 -> bn1 -> ReLU -> conv2 3x3/stride -> bn2 -> ReLU ->
//                             conv3 1x1 -> bn3; v1.5: the stride sits on the 3x3 conv.
//   BasicBlock (expansion 1): conv1 3x3/stride -> bn1 -> ReLU -> conv2 3x3 -> bn2.
//   out = ReLU(main + shortcut); the shortcut is downsample.0 (1x1/stride conv) + downsample.1
//   (BN) when the stride or the channel count changes, else the identity.
// Head:    global average pool -> fc (classes).
// Parameters: conv weights (out, in, kh, kw) with decay; BN weight/bias and fc.bias without;
// fc.weight with decay. BN running statistics are buffers(), not parameters.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/batchnorm2d.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/conv2d.h"
#include "kiln/nn/cross_entropy.h"
#include "kiln/nn/graphed_region.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/pool.h"

namespace kiln::models {

enum class ResNetBlock { basic, bottleneck };

// torchvision: conv ~ N(0, 2/fan_out); fc weight and bias ~ U(±1/sqrt(in)).
// mlperf (tinygrad's MLPerf ResNet): conv = sqrt(2/fan_in)/0.8796 x the MLPerf truncated normal
// (core/init.h; 0.8796 restores the unit variance the truncation removes); fc weight ~ N(0, 0.01²),
// fc bias 0. BN gamma 1, beta 0 in both.
enum class ResNetInit { torchvision, mlperf };

struct ResNetConfig {
  ResNetBlock block = ResNetBlock::bottleneck;
  std::vector<int64_t> depths = {3, 4, 6, 3};
  std::vector<int64_t> widths = {64, 128, 256, 512};  // bottleneck outputs are 4x these
  int64_t stem_width = 64;
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  // 3x3/1 stem conv and no max-pool: keeps the resolution for 28x28 / 32x32 inputs
  // (Fashion-MNIST, CIFAR), where the ImageNet stem would shrink the image 4x at once.
  bool small_images = false;
  // gamma = 0 in the last BN of every block (torchvision's zero_init_residual); off in MLPerf.
  bool zero_init_residual = false;
  float bn_eps = 1e-5f, bn_momentum = 0.1f;
  ResNetInit init = ResNetInit::torchvision;

  static ResNetConfig resnet18(int64_t num_classes = 1000);
  static ResNetConfig resnet34(int64_t num_classes = 1000);
  static ResNetConfig resnet50(int64_t num_classes = 1000);
  static ResNetConfig resnet101(int64_t num_classes = 1000);
  int64_t expansion() const { return block == ResNetBlock::bottleneck ? 4 : 1; }
};

// The convolutions of the stem, and of a block's main path in order, as the model builds them.
nn::Conv2dOptions resnet_stem_conv(const ResNetConfig& c);
std::vector<nn::Conv2dOptions> resnet_block_convs(const ResNetConfig& c, int64_t in, int64_t width, int64_t stride);

// The gradients backward reads once and drops, one set for the whole network (each buffer
// grows to the largest layer's): batch norms' input gradients; convs' input gradients (a block's
// result, and the pooled features' gradient); the downsample convs' input gradients (alive
// beside a block's result) and the max-pool's; the joins' gradients, alternating between
// neighbouring blocks, since a block reads the next one's as its shortcut gradient.
struct ResNetGradBuffers {
  nn::Buffer bn_dx, conv_dx, shortcut_dx, join[2];
};

class ResNet {
 public:
  // Registers every parameter in `store` (which must not be allocated yet), in torchvision's
  // state_dict order, allocates it on `ctx` (ParamStore::allocate) and calls init(0).
  ResNet(const ResNetConfig& config, ParamStore& store, Context& ctx = cpu_context());
  ~ResNet();

  // config.init's initialisation (see ResNetInit), drawn from Philox streams keyed by the
  // parameter index so it is independent of thread count. BN gamma 1 (0 for the last BN of a
  // block with zero_init_residual), beta 0; running stats mean 0, var 1, num_batches_tracked 0.
  void init(uint64_t seed);

  // images: (N, H, W, in_channels) f32, kept by pointer until backward -> logits (N, classes)
  // f32, valid until the next forward. step.training: batch statistics (and running-stat
  // updates). The body runs in step.compute_dtype (images cast to it; the store's compute
  // dtype must match), the head (pooled features, fc, logits) in f32.
  Tensor forward(const Step& step, const float* images_nhwc, int64_t N, int64_t H, int64_t W);
  // dlogits: (N, classes) -> accumulates d/d(param) of the last forward into store.grads.
  void backward(const Step& step, const Tensor& dlogits);
  // A training micro-batch: forward, `loss` over labels (N) (staged with the images), backward of
  // loss_scale x the loss; the loss's totals stay on the device (loss.read(), loss.totals()). With
  // step.capture_regions, unless gradient buckets watch the backward or SyncBN cannot be captured,
  // everything after the copies in is one graph, keyed by the sizes and the loss scale.
  void forward_backward(const Step& step, const float* images_nhwc, int64_t N, int64_t H, int64_t W,
                                  const int32_t* labels, nn::SoftmaxCrossEntropy& loss, float loss_scale);

  // Every BN's running_mean, running_var, num_batches_tracked (torchvision names), in order.
  nn::NamedBuffers buffers();
  // SyncBN for every BatchNorm (nn::BatchNorm2d::set_sync).
  void set_sync_bn(dist::Communicator* comm);
  // Moves the parameters and every BN's statistics onto ctx.device (ParamStore::to_device).
  void to_device(Context& ctx);

  // Forward FLOPs of one H x W image: 2 per multiply-add of every conv and fc (BN, ReLU, pools
  // and additions not counted). Training costs about 3x this.
  int64_t flops_per_image(int64_t H, int64_t W) const;

  const ResNetConfig& config() const { return config_; }

  class Block;

 private:
  std::vector<nn::BatchNorm2d*> batchnorms();  // in buffers() order
  Tensor stage_images(const Step& step, const float* images_nhwc, int64_t N, int64_t H, int64_t W);
  void micro_batch_graph(const Step& step, const Tensor& images, const int32_t* labels, nn::SoftmaxCrossEntropy& loss,
                         float loss_scale);
  Tensor body_forward(const Step& step, Tensor images);
  void body_backward(const Step& step, const Tensor& dlogits);

  ResNetConfig config_;
  ParamStore& store_;
  ResNetGradBuffers grads_;  // before the layers, which point into it
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;  // fused ReLU
  std::optional<nn::MaxPool2d> maxpool_;
  std::vector<std::unique_ptr<Block>> blocks_;
  nn::GlobalAvgPool avgpool_;
  std::optional<nn::Linear> fc_;  // optional only to register it after the blocks
  // Where each block's parameters start in the store, and fc's (Step::grads_final_from).
  std::vector<int64_t> block_offsets_;
  int64_t fc_offset_ = 0;
  nn::Buffer images_in_;          // the images on the step's device (unused on the host)
  nn::Buffer images_;             // the images in a low-precision compute dtype
  // Everything between the images' copy and the loss, as graphs (nn/graphed_region.h), unless
  // SyncBN's collectives cannot be captured.
  nn::GraphedRegion forward_graph_, backward_graph_;
  nn::GraphedRegion micro_batch_;  // forward_backward as one graph
  bool graphable_ = true;
};

}  // namespace kiln::models
