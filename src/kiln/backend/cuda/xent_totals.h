// backend/cuda/xent_totals.h — the launches of the CUDA cross-entropy ops' totals (losses.cc,
// vocab_xent.cc), in losses_bodies.h's fixed tree.
#pragma once
#include <algorithm>

#include "kiln/backend/cuda/losses_bodies.h"
#include "kiln/backend/cuda/op_checks.h"

namespace kiln::ops::cuda {

// totals (3) f64 from the rows' loss terms and hits (N each).
inline void xent_totals(Context& ctx, const char* op, const int32_t* labels, const float* weights,
                        const double* row_loss, const int64_t* row_hit, int64_t N, double* totals) {
  const int64_t chunks = (N + kXentTotalRows - 1) / kXentTotalRows;
  Tensor chunk_totals = ctx.scratch_tensor({std::max<int64_t>(1, 3 * chunks)}, DType::i64);
  double* partial = reinterpret_cast<double*>(chunk_totals.data);
  run(ctx, op, chunks, XentChunkTotalsBody{labels, weights, row_loss, row_hit, N, partial});
  run(ctx, op, 1, XentTotalsBody{partial, chunks, totals});
}

}  // namespace kiln::ops::cuda
