#include "kiln/nn/sequence_parallel.h"

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::nn {

void SequenceSplit::stage(Context& ctx, int64_t B, int64_t S) {
  KILN_CHECK(S % tp_.size == 0, "--sequence-parallel: sequence length {} is not divisible by the tensor-model-parallel "
             "size {}", S, tp_.size);
  if (B == B_ && S == S_ && mine_in_.defined() && mine_in_.device == ctx.device) return;  // staged already
  B_ = B, S_ = S;
  const int64_t t = tp_.size, part = S / t, rows = B * S;
  to_whole_.resize(size_t(rows));
  to_ranks_.resize(size_t(rows));
  mine_.resize(size_t(B * part));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < part; ++s) {
        const int64_t whole = b * S + r * part + s, rank_major = (r * B + b) * part + s;
        to_whole_[size_t(whole)] = int32_t(rank_major);
        to_ranks_[size_t(rank_major)] = int32_t(whole);
        if (r == tp_.rank) mine_[size_t(b * part + s)] = int32_t(whole);
      }
  const auto input = [&](Buffer& buffer, std::vector<int32_t>& v) {
    return buffer.input(ctx, Tensor::view(v.data(), {int64_t(v.size())}, DType::i32));
  };
  to_whole_in_ = input(to_whole_buf_, to_whole_);
  to_ranks_in_ = input(to_ranks_buf_, to_ranks_);
  mine_in_ = input(mine_buf_, mine_);
}

Tensor SequenceSplit::gather(Context& ctx, const Tensor& local, Buffer& out) {
  KILN_CHECK(local.rank() == 2 && local.dim(0) == local_rows(), "sequence parallel: gather of {} rows, expected {}",
             local.rank() == 2 ? local.dim(0) : -1, local_rows());
  Tensor ranks = rank_major_.get(ctx, {B_ * S_, local.dim(1)}, local.dtype);
  tp_.comm->all_gather(local, ranks);
  Tensor whole = out.get(ctx, ranks.shape, local.dtype);
  ops::gather_rows(ctx, ranks, to_whole_in_, whole);
  return whole;
}

Tensor SequenceSplit::scatter_sum(Context& ctx, const Tensor& full, Buffer& out) {
  KILN_CHECK(full.rank() == 2 && full.dim(0) == B_ * S_, "sequence parallel: scatter of {} rows, expected {}",
             full.rank() == 2 ? full.dim(0) : -1, B_ * S_);
  Tensor ranks = rank_major_.get(ctx, full.shape, full.dtype);
  ops::gather_rows(ctx, full, to_ranks_in_, ranks);
  Tensor local = out.get(ctx, {local_rows(), full.dim(1)}, full.dtype);
  tp_.comm->reduce_scatter_sum(ranks, local);
  return local;
}

Tensor SequenceSplit::take(Context& ctx, const Tensor& full, Buffer& out) {
  Tensor local = out.get(ctx, {local_rows(), full.dim(1)}, full.dtype);
  ops::gather_rows(ctx, full, mine_in_, local);
  return local;
}

}  // namespace kiln::nn
