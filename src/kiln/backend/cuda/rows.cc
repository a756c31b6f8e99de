// backend/cuda/rows.cc — the embedding gather and the deterministic scatter-add on CUDA: checks,
// then the bodies of rows_bodies.h.
#include <algorithm>

#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// Items a scatter-add aims for: enough (column, row class) pairs to fill an H200.
constexpr int64_t kScatterItems = 1 << 16;

constexpr int64_t kMaxScatterClasses = 256;



}  // namespace

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
  const int64_t dim = dtable.dim(1);
  if (dim == 0 || ids.numel() == 0) return;
  const int64_t most = std::max<int64_t>(1, std::min(kMaxScatterClasses, dtable.dim(0)));
  const int64_t classes = std::clamp<int64_t>(kScatterItems / dim, 1, most);
  run(ctx, op, classes * dim,
      ScatterAddBody{float_ptr(op, "dy", dy), float_ptr(op, "dtable", dtable), ids.ptr<int32_t>(),
                     ids.numel(), dtable.dim(0), dim, first, classes});
}

}  // namespace kiln::ops::cuda
