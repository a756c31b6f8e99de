// nn/dropout.h — inverted dropout with a Philox mask keyed by (step.seed, layer_id, step.index,
// element): element i is dropped when RngStream{seed, rng_stream(dropout, layer_id, index)}
// .uniform(i) < p; kept elements are scaled by 1/(1-p). Identity when !step.training or p == 0.
#pragma once
#include <cstdint>

#include "kiln/core/philox.h"
#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"

namespace kiln::nn {

class Dropout {
 public:
  Dropout(float p, uint32_t layer_id);

  // x: any shape -> y: same shape (x itself when inactive). Remembers the mask's stream.
  Tensor forward(const Step& step, const Tensor& x);
  // dy -> dx with the mask of the last forward (dy itself when that forward was inactive).
  Tensor backward(const Step& step, const Tensor& dy);

  float p;
  uint32_t layer_id;

 private:
  bool active_ = false;
  RngStream rng_{0, 0};
  Buffer y_, dx_;
};

}  // namespace kiln::nn
