// core/step.h — what a layer needs to know about the current step.
#pragma once
#include <cstdint>

namespace kiln {

struct Step {
  uint64_t seed = 0;      // run seed; with `index` it keys every dropout mask
  uint64_t index = 0;     // micro-step counter: step * accumulation + micro-batch
  bool training = true;   // dropout on, batch statistics on
};

}  // namespace kiln
