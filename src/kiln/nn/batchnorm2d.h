// nn/batchnorm2d.h — BatchNorm2d over NHWC activations (PyTorch semantics), optionally fused
// with the ReLU that follows it. Training normalises with the batch's mean and biased variance
// and updates running_mean / running_var with momentum (running_var takes the unbiased batch
// variance, like PyTorch); eval normalises with the running statistics. Activations are in the
// step's compute dtype; gamma, beta (the f32 master weights: BN parameters live with the f32
// statistics, as under PyTorch autocast), statistics and running statistics are f32.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "kiln/nn/params.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/dist/communicator.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

// A named non-parameter state vector (saved in checkpoints, never optimized).
using NamedBuffers = std::vector<std::pair<std::string, Tensor*>>;

class BatchNorm2d {
 public:
  // Registers `prefix.weight` = 1 and `prefix.bias` = 0 (C) without decay (the caller sets the
  // values after ParamStore::allocate; see reset()). With `relu`, y = max(bn(x), 0).
  BatchNorm2d(ParamStore& store, const std::string& prefix, int64_t channels, bool relu = false,
              float eps = 1e-5f, float momentum = 0.1f);

  // x: (N, H, W, C) -> y: (N, H, W, C), same dtype. step.training picks batch statistics (and
  // updates the running ones) or running statistics. Keeps handles to x and y (both unchanged
  // until backward). y lives in this layer's buffer.
  Tensor forward(const Step& step, const Tensor& x);
  // A residual block's join in the same pass: y = max(bn(x) + shortcut, 0), shortcut x's shape
  // and dtype (this layer's own ReLU, if any, is not applied). The block takes the ReLU's
  // gradient itself (its shortcut needs it too), so backward then takes the gradient of bn(x).
  Tensor forward_join(const Step& step, const Tensor& x, const Tensor& shortcut);
  // dy -> dx (N, H, W, C), in the mode of the last forward; accumulates weight.grad(),
  // bias.grad().
  Tensor backward(const Step& step, const Tensor& dy);

  // gamma = gamma_value, beta = 0, running_mean = 0, running_var = 1, num_batches_tracked = 0.
  void reset(float gamma_value = 1.0f);
  void reset_running_stats();  // mean 0, var 1, count 0
  // prefix.running_mean (C), prefix.running_var (C), prefix.num_batches_tracked (1).
  NamedBuffers buffers();

  // SyncBN (--sync-bn): training statistics, their backward sums and the running statistics
  // span the batches of every rank of `comm` (all ranks must pass the same shapes); null: this
  // process's batch alone (the default, tinygrad's UnsyncedBatchNorm).
  void set_sync(dist::Communicator* comm);
  // Writes backward's dx into `dx` (shared with other layers) instead of its own buffer.
  void use_grad_buffer(Buffer& dx) { dx_.use(dx); }
  // Moves the running and batch statistics (and SyncBN's sums) onto ctx.device.
  void to_device(Context& ctx);

  Param weight, bias;
  Tensor running_mean, running_var;  // (C) f32
  Tensor num_batches_tracked;         // (1) f32; exact up to 2^24 steps
  int64_t channels;
  bool relu;
  float eps, momentum;

 private:
  // bn(x), + residual where defined, then the ReLU where `apply_relu`.
  Tensor forward_impl(const Step& step, const Tensor& x, const Tensor& residual, bool apply_relu);
  void forward_synced(Context& ctx, int64_t rows, const Tensor& residual, bool apply_relu);
  Tensor backward_synced(Context& ctx, const Tensor& dy);

  std::string prefix_;
  dist::Communicator* sync_ = nullptr;
  Tensor sum_, squares_;             // (C) f64: SyncBN forward sums
  Tensor local_sums_, global_sums_;  // (2C) f64: SyncBN backward sums
  Tensor x_, y_;
  bool training_ = true;
  Tensor batch_mean_, batch_var_;  // (C) f32: a training forward's batch statistics
  Tensor mean_, var_;              // (C) the statistics the last forward normalised with
  Buffer out_;
  BufferSlot dx_;
};

}  // namespace kiln::nn
