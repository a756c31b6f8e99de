// nn/dropout.h — inverted dropout with a Philox mask keyed by (step.seed, layer_id, GLOBAL
// sample, position in the sample): the input is sample-major (first dimension B, or B*S rows
// ordered (b, s), with `samples` = B), and element i of micro-batch sample j is dropped when
// RngStream{seed, rng_stream(dropout, layer_id, 0)} at counter (step.sample_offset + j, i)
// (read from step.sample_offset_tensor where the step has one) gives a uniform < p (ops::dropout_forward). Masks therefore do not depend on the micro-batch
// size, the slot of a sample in it, or step.index. Kept elements are scaled by 1/(1-p).
// Identity when !step.training or p == 0.
#pragma once
#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/core/philox.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

class Dropout {
 public:
  Dropout(float p, uint32_t layer_id);
  Dropout(const Dropout&) = delete;  // y_ / dx_ may point at its own buffers
  Dropout& operator=(const Dropout&) = delete;

  // x: (B, ...) sample-major -> y: same shape and dtype (x itself when inactive). Remembers
  // the mask's key.
  Tensor forward(const Step& step, const Tensor& x);
  // x holds `samples` samples (e.g. (B*S, H) rows with samples = B).
  Tensor forward(const Step& step, const Tensor& x, int64_t samples);
  // dy -> dx with the mask of the last forward (dy itself when that forward was inactive).
  Tensor backward(const Step& step, const Tensor& dy);
  // Keys the mask for `samples` samples as forward() does, without applying it, for an op that
  // applies it itself (ops::attention_probs_forward / _backward, with mask()); false when
  // inactive (nothing to apply).
  bool arm(const Step& step, int64_t samples);
  const ops::DropoutMask& mask() const { return mask_; }
  // Writes y and dx into these buffers (e.g. ones shared among layers) instead of its own.
  void use_buffers(Buffer& y, Buffer& dx) { y_.use(y), dx_.use(dx); }
  void use_grad_buffer(Buffer& dx) { dx_.use(dx); }
  // Its buffers over `owner`'s (nn::Buffer::share), for a layer never alive at the same time.
  void share_storage(Dropout& owner) { y_.share_own(owner.y_), dx_.share_own(owner.dx_); }

  float p;
  uint32_t layer_id;
  // The input holds a slice of each sample that starts at this element of the whole sample
  // (the attention heads of one tensor-parallel rank): the mask is the whole sample's.
  int64_t element_offset = 0;

 private:
  bool active_ = false;
  ops::DropoutMask mask_;  // its sample offset: the step's, or a view of host_offset_
  int64_t host_offset_ = 0;
  BufferSlot y_, dx_;
};

}  // namespace kiln::nn
