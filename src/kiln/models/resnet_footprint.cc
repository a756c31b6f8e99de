#include "kiln/models/resnet_footprint.h"

#include <algorithm>

#include "kiln/backend/backend.h"
#include "kiln/nn/pool.h"

namespace kiln::models {
namespace {

// n elements of t as nn::Buffer holds them (whole f32 words).
double buffer_bytes(int64_t n, DType t) { return double((n * int64_t(dtype_size(t)) + 3) / 4 * 4); }

// Element counts of the shared gradient buffers (ResNetGradBuffers), each the largest it gets.
struct SharedGrads {
  int64_t bn_dx = 0, conv_dx = 0, shortcut_dx = 0, join[2] = {};
};

// One pass of the walk for N images: parameters, saved bytes, shared gradient sizes, scratch.
struct Tally {
  ResNetFootprint f;
  SharedGrads grads;
  int64_t H = 0, W = 0, C = 0;  // the activation's shape per image where the walk is
  double forward_scratch = 0;    // what the forward passes alone take (an evaluation's)
};

class Walker {
 public:
  Walker(int64_t N, DType e) : N_(N), e_(e) {}

  void parameter(int64_t numel) {
    t.f.parameters += numel;
    t.f.store_elements += (numel + 15) / 16 * 16;
  }
  // conv -> batch norm on the current activation; returns the conv's input elements (its dx).
  int64_t conv_bn(const nn::Conv2dOptions& o) {
    const ops::ConvShape s = nn::conv2d_shape(o, N_, t.H, t.W);
    const int64_t input = N_ * t.H * t.W * o.in, output = N_ * s.P() * s.Q() * o.out;
    parameter(o.out * o.in * o.kernel * o.kernel);
    t.f.flops_per_image += nn::conv2d_flops(o, t.H, t.W);
    parameter(o.out);  // gamma
    parameter(o.out);  // beta
    t.f.saved += 2 * buffer_bytes(output, e_) + double(4 * o.out * 4 + 4);  // y, BN out; BN statistics
    t.grads.bn_dx = std::max(t.grads.bn_dx, output);
    const ops::ConvScratch scratch = ops::conv2d_scratch_bytes(s, e_, false);
    t.f.scratch = std::max(t.f.scratch, double(scratch.most()));
    t.forward_scratch = std::max(t.forward_scratch, double(scratch.forward));
    t.H = s.P(), t.W = s.Q(), t.C = o.out;
    return input;
  }
  void block(const ResNetConfig& c, int64_t width, int64_t stride, int parity) {
    const int64_t in = t.C, out = width * c.expansion(), H = t.H, W = t.W;
    for (const nn::Conv2dOptions& o : resnet_block_convs(c, in, width, stride))
      t.grads.conv_dx = std::max(t.grads.conv_dx, conv_bn(o));
    if (stride != 1 || in != out) {  // from the block's input to the main path's output shape
      t.H = H, t.W = W, t.C = in;
      t.grads.shortcut_dx = std::max(t.grads.shortcut_dx, conv_bn({in, out, 1, stride, 0}));
    }
    t.grads.join[parity] = std::max(t.grads.join[parity], N_ * t.H * t.W * t.C);
  }
  void max_pool() {
    t.grads.shortcut_dx = std::max(t.grads.shortcut_dx, N_ * t.H * t.W * t.C);  // its dx
    const nn::MaxPool2d pool;  // the model's: 3x3, stride 2, padding 1
    t.H = pool.out_size(t.H), t.W = pool.out_size(t.W);
    const int64_t output = N_ * t.H * t.W * t.C;
    t.f.saved += buffer_bytes(output, e_) + buffer_bytes(output, DType::i32);  // y, argmax
  }

  Tally t;

 private:
  int64_t N_;
  DType e_;
};

Tally tally(const ResNetConfig& c, int64_t N, int64_t image, DType e) {
  Walker w(N, e);
  w.t.H = w.t.W = image, w.t.C = c.in_channels;
  if (e != DType::f32) w.t.f.saved += buffer_bytes(N * image * image * c.in_channels, e);
  w.conv_bn(resnet_stem_conv(c));  // no dx
  if (!c.small_images) w.max_pool();
  int block = 0;
  for (size_t stage = 0; stage < c.depths.size(); ++stage)
    for (int64_t b = 0; b < c.depths[stage]; ++b, ++block)
      w.block(c, c.widths[stage], stage > 0 && b == 0 ? 2 : 1, block % 2);
  Tally& t = w.t;
  t.grads.conv_dx = std::max(t.grads.conv_dx, N * t.H * t.W * t.C);  // the average pool's dx
  w.parameter(t.C * c.num_classes);
  t.f.flops_per_image += 2 * t.C * c.num_classes;
  w.parameter(c.num_classes);
  // Pooled features, logits; the loss's labels and log-sum-exps, totals.
  t.f.saved += buffer_bytes(N * t.C, DType::f32) + buffer_bytes(N * c.num_classes, DType::f32) +
               2 * buffer_bytes(N, DType::f32) + 24;
  const SharedGrads& g = t.grads;
  t.f.gradients = buffer_bytes(N * t.C, DType::f32) + buffer_bytes(N * c.num_classes, DType::f32) +
                  buffer_bytes(g.bn_dx, e) + buffer_bytes(g.conv_dx, e) + buffer_bytes(g.shortcut_dx, e) +
                  buffer_bytes(g.join[0], e) + buffer_bytes(g.join[1], e);
  return t;
}

}  // namespace

ResNetFootprint resnet_footprint(const ResNetConfig& config, int64_t batch, int64_t eval_batch, int64_t image,
                                 DType compute) {
  ResNetFootprint f = tally(config, batch, image, compute).f;
  if (eval_batch > batch) {
    const Tally eval = tally(config, eval_batch, image, compute);
    f.saved = eval.f.saved;
    f.scratch = std::max(f.scratch, eval.forward_scratch);
  }
  return f;
}

}  // namespace kiln::models
