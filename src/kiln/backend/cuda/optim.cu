// backend/cuda/optim.cu — the multi-tensor kernels that optim_ops.cc runs: the bodies of
// optim_bodies.h.
#include "kiln/backend/cuda/optim_bodies.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/launch.cuh"

namespace kiln::ops::cuda {

template void run_kernel(int64_t, const LaneSquaresBody&, void*);
template void run_kernel(int64_t, const LambMomentsBody&, void*);
template void run_kernel(int64_t, const GroupTotalsBody&, void*);
template void run_kernel(int64_t, const SegmentTotalsBody&, void*);
template void run_kernel(int64_t, const LambRatioBody&, void*);
template void run_kernel(int64_t, const LarsRatioBody&, void*);
template void run_kernel(int64_t, const AdamWBody&, void*);
template void run_kernel(int64_t, const LambUpdateBody&, void*);
template void run_kernel(int64_t, const LarsUpdateBody&, void*);
template void run_kernel(int64_t, const ScaleByScalarBody&, void*);
template void run_kernel(int64_t, const StepNormSquaresBody&, void*);
template void run_kernel(int64_t, const StepDecideBody&, void*);

}  // namespace kiln::ops::cuda
