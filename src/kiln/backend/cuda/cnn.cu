// backend/cuda/cnn.cu — the pooling, batch-norm and convolution kernels that pool.cc,
// batchnorm.cc and conv.cc run: the bodies of pool_bodies.h, batchnorm_bodies.h and conv_bodies.h.
#include "kiln/backend/cuda/batchnorm_bodies.h"
#include "kiln/backend/cuda/conv_bodies.h"
#include "kiln/backend/cuda/pool_bodies.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/launch.cuh"

namespace kiln::ops::cuda {

template void run_kernel(int64_t, const MaxPoolBody&, void*);
template void run_kernel(int64_t, const MaxPoolBackwardBody&, void*);
template void run_kernel(int64_t, const GlobalAvgPoolBody&, void*);
template void run_kernel(int64_t, const GlobalAvgPoolBackwardBody&, void*);
template void run_kernel(int64_t, const BnRunBody&, void*);
template void run_kernel(int64_t, const BnChunkBody&, void*);
template void run_kernel(int64_t, const BnCombineBody&, void*);
template void run_kernel(int64_t, const BnStatsBody&, void*);
template void run_kernel(int64_t, const BnShiftBody&, void*);
template void run_kernel(int64_t, const BnShiftedStatsBody&, void*);
template void run_kernel(int64_t, const BnForwardCoefBody&, void*);
template void run_kernel(int64_t, const BnNormalizeBody&, void*);
template void run_kernel(int64_t, const BnBackwardCoefBody&, void*);
template void run_kernel(int64_t, const BnBackwardDxBody&, void*);
template void run_kernel(int64_t, const BnRunningBody&, void*);
template void run_kernel(int64_t, const WgradToKcrsBody&, void*);

}  // namespace kiln::ops::cuda
