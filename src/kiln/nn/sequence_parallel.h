// nn/sequence_parallel.h — Megatron's sequence parallelism (--sequence-parallel, spec §3.2) in
// kiln's row order. A tensor of B samples x S positions is (B*S, H) with rows (b, s); under
// sequence parallelism each rank of the tensor-parallel group holds its S/t positions of every
// sample, (B*S/t, H) with rows (b, s_local), rank r holding positions [r S/t, (r + 1) S/t). The
// LayerNorms, dropouts and residual adds between the tensor-parallel matrix products run on these
// rows; the column-parallel products read the whole sequence (gather), the row-parallel ones leave
// their partial sums to be summed and split at once (scatter_sum) instead of all-reduced.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/core/context.h"
#include "kiln/core/tensor.h"
#include "kiln/nn/buffer.h"
#include "kiln/nn/tensor_parallel.h"

namespace kiln::nn {

class SequenceSplit {
 public:
  explicit SequenceSplit(const TensorParallel& tp) : tp_(tp) {}

  // The row maps for B samples of S positions (S divisible by the group size; checked), made and
  // copied to ctx.device when the sizes change: outside a graph capture, before the ops that use them.
  void stage(Context& ctx, int64_t B, int64_t S);
  int64_t local_rows() const { return B_ * (S_ / tp_.size); }
  // Where this rank's positions start in each sample (dropout keys).
  int64_t first_position() const { return tp_.rank * (S_ / tp_.size); }

  // local (B*S/t, H) -> (B*S, H) in `out`: every rank's positions, rows back in (b, s) order.
  Tensor gather(Context& ctx, const Tensor& local, Buffer& out);
  // (B*S, H), a partial sum on each rank -> (B*S/t, H) in `out`: this rank's rows of the sum over
  // the group (added in rank order, as an all-reduce adds them).
  Tensor scatter_sum(Context& ctx, const Tensor& full, Buffer& out);
  // (B*S, H), the same on every rank -> (B*S/t, H) in `out`: this rank's rows.
  Tensor take(Context& ctx, const Tensor& full, Buffer& out);

 private:
  TensorParallel tp_;
  int64_t B_ = 0, S_ = 0;
  // Row i of the whole tensor is row to_whole_[i] of the rank-major gather (rank, b, s_local);
  // row j of that is row to_ranks_[j] of the whole; this rank's rows of the whole are mine_.
  std::vector<int32_t> to_whole_, to_ranks_, mine_;
  Buffer to_whole_buf_, to_ranks_buf_, mine_buf_, rank_major_;
  Tensor to_whole_in_, to_ranks_in_, mine_in_;  // on the step's device
};

}  // namespace kiln::nn
