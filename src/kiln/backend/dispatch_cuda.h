// backend/dispatch_cuda.h — for the op table's entry points (dispatch.cc): KILN_ON_CUDA(ctx, op,
// call) is the CUDA implementation's call, or, in a build without the CUDA backend, the error
// saying so. That error is a void call, so the macro fits entry points that return nothing; one
// that returns a value spells out `#ifdef KILN_HAVE_CUDA` (graph.cc, transfer.cc), and the
// CPU-only compile of these files (CMake's kiln_cpu_only_check) catches a macro in its place.
#pragma once
#include "kiln/backend/route.h"
#ifdef KILN_HAVE_CUDA
#include "kiln/backend/cuda/cuda_ops.h"
#define KILN_ON_CUDA(ctx, op, call) cuda::call
#else
#define KILN_ON_CUDA(ctx, op, call) no_backend(ctx, op)
#endif
