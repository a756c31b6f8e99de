// nn/buffer.h — a layer's reusable activation buffer: allocated on first use, grown only when
// a larger shape arrives, so steady-state forward/backward allocate nothing. Inside a
// nn::LoanScope the memory may be lent gradient memory instead (nn/grad_loan.h).
#pragma once
#include "kiln/backend/backend.h"
#include "kiln/core/context.h"
#include "kiln/core/tensor.h"

namespace kiln::nn {

class Buffer {
 public:
  // A tensor of `shape` on ctx.device over this buffer's storage; contents are unspecified.
  Tensor get(const Context& ctx, const Shape& shape, DType dtype = DType::f32);
  // A host tensor (a batch's ids, labels or images) as an operand on ctx.device: `host` itself
  // when that is the host, else its copy in this buffer (ops::staged_copy: on a GPU the host
  // does not wait for the ops queued before the copy).
  Tensor input(Context& ctx, const Tensor& host);
  // Its copy in this buffer on any device: what must outlive the caller's host memory (a loss's
  // labels, read again by backward).
  Tensor copy_in(Context& ctx, const Tensor& host);
  // From now on the storage is `owner`'s (get() returns owner.get()): layers that never hold their
  // activations at the same time share them (full recomputation, models/bert_stage.h).
  void share(Buffer& owner) { owner_ = &owner; }

 private:
  Buffer* owner_ = nullptr;
  Tensor storage_;
  size_t capacity_ = 0;  // bytes
  ops::HostStaging staging_;
};

// A layer's buffer for what only the next op reads (an output, an input gradient): its own, or
// one the model shares among layers whose uses do not overlap (use()). It holds no pointer to
// itself, so the layer stays movable.
class BufferSlot {
 public:
  void use(Buffer& shared) { shared_ = &shared; }
  // Its own buffer over `owner`'s own (Buffer::share).
  void share_own(BufferSlot& owner) { own_.share(owner.own_); }
  Tensor get(const Context& ctx, const Shape& shape, DType dtype = DType::f32) {
    return buffer().get(ctx, shape, dtype);
  }
  Buffer& buffer() { return shared_ ? *shared_ : own_; }

 private:
  Buffer own_;
  Buffer* shared_ = nullptr;
};

}  // namespace kiln::nn
