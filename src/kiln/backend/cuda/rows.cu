// backend/cuda/rows.cu — the row, column and loss bodies of rows_bodies.h, layernorm_bodies.h and
// losses_bodies.h.
#include "kiln/backend/cuda/layernorm_bodies.h"
#include "kiln/backend/cuda/losses_bodies.h"
#include "kiln/backend/cuda/rows_bodies.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/launch.cuh"

namespace kiln::ops::cuda {

template void run_kernel(int64_t, const SoftmaxLaneBody&, void*);
template void run_kernel(int64_t, const SoftmaxRowStatsBody&, void*);
template void run_kernel(int64_t, const SoftmaxApplyBody&, void*);
template void run_kernel(int64_t, const SoftmaxBackwardLaneBody&, void*);
template void run_kernel(int64_t, const LaneSumBody&, void*);
template void run_kernel(int64_t, const SoftmaxBackwardApplyBody&, void*);
template void run_kernel(int64_t, const RowMomentsLaneBody&, void*);
template void run_kernel(int64_t, const LayerNormStatsBody&, void*);
template void run_kernel(int64_t, const LayerNormApplyBody&, void*);
template void run_kernel(int64_t, const LayerNormGradLaneBody&, void*);
template void run_kernel(int64_t, const LayerNormGradStatsBody&, void*);
template void run_kernel(int64_t, const LayerNormGradApplyBody&, void*);
template void run_kernel(int64_t, const LayerNormParamChunkBody&, void*);
#define KILN_RUN_SPANS(B)                                          \
  template void run_kernel(int64_t, const B<float>&, void*);       \
  template void run_kernel(int64_t, const B<bf16_t>&, void*);      \
  template void run_kernel(int64_t, const B<f16_t>&, void*);
KILN_RUN_SPANS(SoftmaxLaneSpanBody)
KILN_RUN_SPANS(SoftmaxApplySpanBody)
KILN_RUN_SPANS(SoftmaxBackwardLaneSpanBody)
KILN_RUN_SPANS(SoftmaxBackwardApplySpanBody)
KILN_RUN_SPANS(RowMomentsSpanBody)
KILN_RUN_SPANS(LayerNormApplySpanBody)
KILN_RUN_SPANS(LayerNormGradSpanBody)
KILN_RUN_SPANS(LayerNormGradApplySpanBody)
KILN_RUN_SPANS(LayerNormParamChunkSpanBody)
KILN_RUN_SPANS(BiasGradChunkSpanBody)
KILN_RUN_SPANS(XentMaxLaneSpanBody)
KILN_RUN_SPANS(XentSumexpLaneSpanBody)
KILN_RUN_SPANS(XentGradSpanBody)
KILN_RUN_SPANS(VocabSumexpLaneSpanBody)
template void run_kernel(int64_t, const LayerNormParamSumBody&, void*);
template void run_kernel(int64_t, const BiasGradChunkBody&, void*);
template void run_kernel(int64_t, const BiasGradCombineBody&, void*);
template void run_kernel(int64_t, const GatherBody&, void*);
template void run_kernel(int64_t, const ScatterRankBody&, void*);
template void run_kernel(int64_t, const ScatterPlaceBody&, void*);
template void run_kernel(int64_t, const ScatterRunBody&, void*);
template void run_kernel(int64_t, const XentMaxLaneBody&, void*);
template void run_kernel(int64_t, const XentSumexpLaneBody&, void*);
template void run_kernel(int64_t, const XentRowBody&, void*);
template void run_kernel(int64_t, const XentChunkTotalsBody&, void*);
template void run_kernel(int64_t, const XentTotalsBody&, void*);
template void run_kernel(int64_t, const XentGradBody&, void*);
template void run_kernel(int64_t, const VocabPartialsBody&, void*);
template void run_kernel(int64_t, const VocabSumexpLaneBody&, void*);
template void run_kernel(int64_t, const VocabCombineBody&, void*);
template void run_kernel(int64_t, const VocabRowTotalsBody&, void*);

}  // namespace kiln::ops::cuda
