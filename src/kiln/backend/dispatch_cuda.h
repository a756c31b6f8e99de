// backend/dispatch_cuda.h — for the op table's entry points (dispatch*.cc): KILN_ON_CUDA(ctx, op,
// call) is the CUDA implementation's call, or, in a build without the CUDA backend, the error
// saying so.
#pragma once
#include "kiln/backend/route.h"
#ifdef KILN_HAVE_CUDA
#include "kiln/backend/cuda/cuda_ops.h"
#define KILN_ON_CUDA(ctx, op, call) cuda::call
#else
#define KILN_ON_CUDA(ctx, op, call) no_backend(ctx, op)
#endif
