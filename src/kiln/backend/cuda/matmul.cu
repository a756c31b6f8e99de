// backend/cuda/matmul.cu — the matmul's one kernel of its own: the pointer tables of a product
// cuBLASLt runs as one pointer-array batch (matmul_plan.h).
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/launch.cuh"
#include "kiln/backend/cuda/matmul_plan.h"

namespace kiln::ops::cuda {

template void run_kernel(int64_t, const PointerTableBody&, void*);

}  // namespace kiln::ops::cuda
