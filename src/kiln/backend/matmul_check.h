// backend/matmul_check.h — what every backend's matmul computes about its views (the dispatch has
// checked them: matmul_check.cc).
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
// op(a) (M, K) times op(b) (K, N).
inline MatmulDims matmul_dims(const MatView& a, const MatView& b) { return {op_rows(a), op_cols(b), op_cols(a)}; }

}  // namespace kiln::ops
