// backend/cuda/elementwise.cu — the elementwise kernels (cast.cc, elementwise.cc, relu.cc): the
// bodies of elementwise_bodies.h over one item per span (vec_access.h) or element. The typed bodies
// of ops that take any dtype per operand are instantiated for every combination of f32, bf16 and
// f16 storage; tanh, ReLU, residual_add and bias_add for the combinations kiln's layers use (one
// dtype, or an f32 bias on bf16 / f16 rows), their FloatPtr bodies for the rest.
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
KILN_FLOAT_BODY2(GeluForwardSpanBody)
KILN_FLOAT_BODY3(GeluBackwardBody)
KILN_FLOAT_BODY2(DropoutBody)
KILN_FLOAT_BODY(TanhForwardSpanBody)
KILN_FLOAT_BODY(TanhBackwardSpanBody)
KILN_FLOAT_BODY(ReluForwardSpanBody)
KILN_FLOAT_BODY(ReluBackwardSpanBody)
KILN_RUN_KERNEL(BiasAddSpanBody<float, float>)
KILN_RUN_KERNEL(BiasAddSpanBody<bf16_t, bf16_t>)
KILN_RUN_KERNEL(BiasAddSpanBody<f16_t, f16_t>)
KILN_RUN_KERNEL(BiasAddSpanBody<bf16_t, float>)
KILN_RUN_KERNEL(BiasAddSpanBody<f16_t, float>)
KILN_RUN_KERNEL(TanhForwardBody)
KILN_RUN_KERNEL(TanhBackwardBody)
KILN_RUN_KERNEL(ReluForwardBody)
KILN_RUN_KERNEL(ReluBackwardBody)
KILN_RUN_KERNEL(AccumulateBody)
KILN_RUN_KERNEL(BiasAddBody)

}  // namespace kiln::ops::cuda
