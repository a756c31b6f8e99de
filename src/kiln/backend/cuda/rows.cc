// backend/cuda/rows.cc — the embedding gather and the deterministic scatter-add on CUDA: checks,
// then the bodies of rows_bodies.h.
#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {

void gather_rows(Context& ctx, const Tensor& table, const Tensor& ids, Tensor& out, int64_t first) {
  const char* op = "gather_rows";
  const OpScope scope = expect_cuda(ctx, op, {&table, &ids, &out});
  run(ctx, op, out.numel(),
      GatherBody{float_ptr(op, "table", table), float_ptr(op, "out", out), ids.ptr<int32_t>(),
                 table.dim(0), table.dim(1), first});
}

void scatter_add_rows(Context& ctx, const Tensor& dy, const Tensor& ids, Tensor& dtable, int64_t first) {
  const char* op = "scatter_add_rows";
  const OpScope scope = expect_cuda(ctx, op, {&dy, &ids, &dtable});
  const int64_t n = ids.numel(), num = dtable.dim(0), dim = dtable.dim(1);
  if (dim == 0 || n == 0) return;
  // rows_bodies.h: rank the ids by destination row, place them, add each row's run in order.
  const ScratchScope own_scratch(ctx);
  const int64_t slices = (n + kRankSlice - 1) / kRankSlice;
  Tensor rank_parts = ctx.scratch_tensor({slices * n}, DType::i32);
  Tensor sorted = ctx.scratch_tensor({2, n}, DType::i32);  // order, then the sorted rows
  int32_t* order = sorted.ptr<int32_t>();
  const int32_t* id = ids.ptr<int32_t>();
  run(ctx, op, slices * n, ScatterRankBody{id, n, num, first, rank_parts.ptr<int32_t>()});
  run(ctx, op, n, ScatterPlaceBody{id, rank_parts.ptr<int32_t>(), n, num, first, slices, order, order + n});
  run(ctx, op, n * dim,
      ScatterRunBody{float_ptr(op, "dy", dy), float_ptr(op, "dtable", dtable), order, order + n, n, num, dim});
}

}  // namespace kiln::ops::cuda
