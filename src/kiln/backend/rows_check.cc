// backend/rows_check.cc — the argument checks of the embedding rows' ops (backend/checks.h), made
// once in the dispatch for both backends.
#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

// table (num, dim), ids (n) i32, rows (n, dim).
void check_rows(const char* op, const Tensor& table, const Tensor& ids, const Tensor& rows) {
  expect_dtype(op, "ids", ids, {DType::i32});
  KILN_CHECK(table.rank() == 2 && rows.rank() == 2 && table.dim(1) == rows.dim(1) &&
                 rows.dim(0) == ids.numel(),
             "op {}: table {}, ids {}, rows {}", op, shape_str(table.shape), shape_str(ids.shape),
             shape_str(rows.shape));
}

}  // namespace

void check_args(check::gather_rows, const Tensor& table, const Tensor& ids, Tensor& out, int64_t first) {
  check_rows("gather_rows", table, ids, out);
}

void check_args(check::scatter_add_rows, const Tensor& dy, const Tensor& ids, Tensor& dtable, int64_t first) {
  check_rows("scatter_add_rows", dtable, ids, dy);
}

}  // namespace kiln::ops
