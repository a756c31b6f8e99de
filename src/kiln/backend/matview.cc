// backend/matview.cc — the MatView constructors of backend.h; they only describe memory, so
// every backend shares them.
#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::ops {

MatView mat(const Tensor& t, bool trans) {
  KILN_CHECK(t.rank() == 2, "op matmul: mat() needs a 2-D tensor, got {}", shape_str(t.shape));
  MatView v;
  v.t = t;
  v.rows = t.dim(0);
  v.cols = t.dim(1);
  v.ld = t.dim(1);
  v.trans = trans;
  return v;
}

MatView heads_view(const Tensor& x, int64_t B, int64_t S, int64_t heads, bool trans) {
  KILN_CHECK(x.rank() == 2 && x.dim(0) == B * S && heads > 0 && x.dim(1) % heads == 0,
             "op matmul: heads_view of {} as ({}*{}, {} heads)", shape_str(x.shape), B, S, heads);
  const int64_t H = x.dim(1), d = H / heads;
  MatView v;
  v.t = x;
  v.rows = S;
  v.cols = d;
  v.ld = H;
  v.batch[0] = B;
  v.batch[1] = heads;
  v.batch_stride[0] = S * H;
  v.batch_stride[1] = d;
  v.trans = trans;
  return v;
}

MatView per_head(const Tensor& x, bool trans) {
  KILN_CHECK(x.rank() == 4, "op matmul: per_head needs (B, heads, S, T), got {}",
             shape_str(x.shape));
  MatView v;
  v.t = x;
  v.rows = x.dim(2);
  v.cols = x.dim(3);
  v.ld = x.dim(3);
  v.batch[0] = x.dim(0);
  v.batch[1] = x.dim(1);
  v.batch_stride[0] = x.dim(1) * x.dim(2) * x.dim(3);
  v.batch_stride[1] = x.dim(2) * x.dim(3);
  v.trans = trans;
  return v;
}

}  // namespace kiln::ops
