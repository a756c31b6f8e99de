// nn/grad_loan.h — gradient memory lent to saved activations.
//
// Between ParamStore::clear_grads() and a parameter's first gradient contribution, its slice of the
// gradient buffer holds nothing (nn/params.h). Backward writes the encoder layers' gradients from
// the last layer to the first, so the activations that layer n saves in forward (alive until its
// backward ends) can live in the gradients of layers 0..n-1, which are first written after that.
// At the peak of a step (every activation saved, backward about to start) the gradient buffer then
// holds activations instead of nothing: a BERT step's peak drops by about the gradients of all
// layers but the last.
//
// Only for a step of one micro-batch (an earlier micro-batch's gradients would still be alive)
// that starts with clear_grads(); check_unwritten() says so loudly if a step did not.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/core/device.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/params.h"

namespace kiln::nn {

class GradLoan {
 public:
  // layer_begins[n]: the flat offset (elements) where layer n's gradients start; they end where
  // layer n + 1's start.
  GradLoan(const ParamStore& store, std::vector<int64_t> layer_begins);

  // `bytes` of the gradients of layers below `layer` that no earlier take() holds, 64-byte
  // aligned (f32 elements, the storage a Buffer keeps), or an undefined tensor when they do not
  // have that much left or `device` is not the gradients'. Taken memory stays lent for good.
  Tensor take(int64_t layer, size_t bytes, const Device& device);
  size_t bytes_lent() const { return size_t(end_ - start_); }
  // Raises kiln::Error when a parameter whose gradient overlaps lent memory holds a contribution:
  // a training forward must not overwrite it.
  void check_unwritten() const;

 private:
  const ParamStore& store_;
  std::vector<int64_t> layer_begins_;
  int64_t start_ = 0, end_ = 0;  // lent bytes [start_, end_) from the gradients' first byte
};

// While alive, a Buffer that allocates (nn/buffer.h) first asks `loan` (nullptr: nobody) for
// memory of layer `layer`. One at a time, on the thread that runs the layers' forward.
class LoanScope {
 public:
  LoanScope(GradLoan* loan, int64_t layer);
  ~LoanScope();
  LoanScope(const LoanScope&) = delete;
  LoanScope& operator=(const LoanScope&) = delete;
  // Memory from the open scope's loan, or an undefined tensor.
  static Tensor take(size_t bytes, const Device& device);
};

}  // namespace kiln::nn
