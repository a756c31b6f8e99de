// nn/tensor_parallel.h — a layer's place in a Megatron tensor-parallel group (spec §3.2): the
// group's communicator, this rank and the group size. The default is one rank (no split).
// Tensor-parallel layers reduce host f32 activations, so they run on CPU contexts in f32.
#pragma once
#include <cstdint>

#include "kiln/core/tensor.h"
#include "kiln/dist/communicator.h"

namespace kiln::nn {

class SequenceSplit;

struct TensorParallel {
  dist::Communicator* comm = nullptr;  // null: one rank
  int rank = 0, size = 1;
  // Sequence parallelism (nn/sequence_parallel.h): the stage's row maps; null without it.
  SequenceSplit* sequence = nullptr;

  static TensorParallel over(dist::Communicator& comm) { return {&comm, comm.rank(), comm.size()}; }
  bool split() const { return size > 1; }
  // This rank's share of n entries (n divisible by size; checked) and where it starts.
  int64_t share(int64_t n, const char* what) const;
  int64_t start(int64_t n) const { return rank * (n / size); }
  // t = sum of t over the group (in rank order); nothing on one rank.
  void all_reduce(Tensor& t) const;
};

}  // namespace kiln::nn
