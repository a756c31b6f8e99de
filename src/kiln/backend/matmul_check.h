// backend/matmul_check.h — what every backend's matmul checks and computes about its views.
#pragma once
#include <cstdint>

#include "kiln/backend/backend.h"

namespace kiln::ops {

// Stored-matrix shape of op(v) = (R, C).
inline int64_t op_rows(const MatView& v) { return v.trans ? v.cols : v.rows; }
inline int64_t op_cols(const MatView& v) { return v.trans ? v.rows : v.cols; }
// Address of the view's first element.
void* element(const MatView& v);

struct MatmulDims {
  int64_t M, N, K;
};
// Throws a kiln::Error naming what breaks matmul's contract (backend.h): views reaching outside
// their tensors, mismatched shapes, batches or dtypes, unsupported option combinations.
MatmulDims check_matmul(const MatView& a, const MatView& b, const MatView& c,
                        const MatmulOpts& opts);

}  // namespace kiln::ops
