// nn/gelu.h — GELU activation, exact (erf) or Megatron's tanh approximation.
#pragma once
#include "kiln/backend/backend.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

using ops::GeluKind;

class Gelu {
 public:
  explicit Gelu(GeluKind kind = GeluKind::erf) : kind(kind) {}

  // x: any shape and float dtype -> y: same shape and dtype; keeps x for backward.
  Tensor forward(const Step& step, const Tensor& x);
  // dy -> dx = dy * gelu'(x).
  Tensor backward(const Step& step, const Tensor& dy);

  // Writes backward's dx into this buffer (shared with other layers) instead of its own.
  void use_grad_buffer(Buffer& dx) { dx_.use(dx); }
  // Its buffers over `owner`'s (nn::Buffer::share), for a layer never alive at the same time.
  void share_storage(Gelu& owner) { y_.share(owner.y_), dx_.share_own(owner.dx_); }

  GeluKind kind;

 private:
  Tensor x_;
  Buffer y_;
  BufferSlot dx_;
};

}  // namespace kiln::nn
