// backend/cuda/elementwise.cu — the elementwise kernels (cast.cc, elementwise.cc, relu.cc): the
// bodies of elementwise_bodies.h over one item per element (per Philox block for dropout). The typed bodies
// are instantiated for every combination of f32, bf16 and f16 storage.
#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/launch.cuh"

namespace kiln::ops::cuda {

#define KILN_RUN_KERNEL(...) template void run_kernel(int64_t, const __VA_ARGS__&, void*);
// Body<..., T> for T in f32, bf16, f16 storage (one macro per template parameter: a macro does not
// expand inside itself).
#define KILN_TYPES_A(M, ...) M(__VA_ARGS__ float) M(__VA_ARGS__ bf16_t) M(__VA_ARGS__ f16_t)
#define KILN_TYPES_B(M, ...) M(__VA_ARGS__ float) M(__VA_ARGS__ bf16_t) M(__VA_ARGS__ f16_t)
#define KILN_TYPES_C(M, ...) M(__VA_ARGS__ float) M(__VA_ARGS__ bf16_t) M(__VA_ARGS__ f16_t)
#define KILN_BODY1(B, ...) KILN_RUN_KERNEL(B<__VA_ARGS__>)
#define KILN_BODY2(B, ...) KILN_TYPES_A(KILN_BODY1, B, __VA_ARGS__, )
#define KILN_BODY3(B, ...) KILN_TYPES_B(KILN_BODY2, B, __VA_ARGS__, )
#define KILN_FLOAT_BODY(B) KILN_TYPES_C(KILN_BODY1, B, )
#define KILN_FLOAT_BODY2(B) KILN_TYPES_C(KILN_BODY2, B, )
#define KILN_FLOAT_BODY3(B) KILN_TYPES_C(KILN_BODY3, B, )

KILN_RUN_KERNEL(FillBody<int32_t>)
KILN_FLOAT_BODY(FillBody)
KILN_FLOAT_BODY2(CastBody)
KILN_FLOAT_BODY3(AddBody)
KILN_FLOAT_BODY2(ScaleBody)
KILN_FLOAT_BODY2(GeluForwardBody)
KILN_FLOAT_BODY3(GeluBackwardBody)
KILN_FLOAT_BODY2(DropoutBody)
KILN_RUN_KERNEL(TanhForwardBody)
KILN_RUN_KERNEL(TanhBackwardBody)
KILN_RUN_KERNEL(ReluForwardBody)
KILN_RUN_KERNEL(ReluBackwardBody)
KILN_RUN_KERNEL(AccumulateBody)
KILN_RUN_KERNEL(BiasAddBody)

}  // namespace kiln::ops::cuda
