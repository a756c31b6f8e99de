// models/resnet_footprint.h — what a ResNet holds for a training step, from its configuration
// alone (`kiln train resnet --dry-run`): the same walk over stem, blocks and head as the model's
// constructor, counting each layer's buffers as models/resnet.cc and nn/ keep them.
//
// Saved (forward, in the compute dtype e unless named): the images' low-precision copy (not in
// f32); every conv's output and every batch norm's (the next layer's input and the join); the
// max-pool's output and its i32 argmax; the pooled features, fc output and loss in f32.
// Gradients: the head's f32 ones (fc's input gradient, the logits' gradient) and the network's
// shared buffers (models::ResNetGradBuffers), each as large as the largest layer that writes it.
// Scratch: the largest convolution's (ops::conv2d_scratch_bytes; the other ops' is far smaller),
// an evaluation's forward at its batch included.
#pragma once
#include <cstdint>

#include "kiln/core/dtype.h"
#include "kiln/models/resnet.h"

namespace kiln::models {

struct ResNetFootprint {
  int64_t parameters = 0;      // elements
  int64_t store_elements = 0;  // the flat store's size: each parameter starts at a multiple of 16
  double saved = 0;            // bytes: what forward keeps, for `eval_batch` images where that is more
  double gradients = 0;        // bytes: the head's and the shared gradient buffers, `batch` images
  double scratch = 0;          // bytes: training's passes, and an evaluation's forward
  int64_t flops_per_image = 0; // forward: 2 per multiply-add of every conv and fc (ResNet::flops_per_image)
};

// `batch` training images of image x image pixels (and evaluation batches of `eval_batch`, whose
// forward grows the saved buffers when larger), the body in `compute`.
ResNetFootprint resnet_footprint(const ResNetConfig& config, int64_t batch, int64_t eval_batch, int64_t image,
                                 DType compute);

}  // namespace kiln::models
