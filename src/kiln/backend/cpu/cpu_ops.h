// backend/cpu/cpu_ops.h — the CPU implementations of the op table (backend/ops.def, the list with
// the contracts); backend/dispatch.cc calls them for CPU contexts.
#pragma once
#include "kiln/backend/backend.h"

namespace kiln::ops::cpu {

// Every op of backend/ops.def.
#define KILN_OP(name, params, args) void name(Context& ctx, KILN_OP_PARAMS params);
#include "kiln/backend/ops.def"

// The ops with a dispatch of their own (backend.h).
void copy(Context& ctx, const Tensor& src, Tensor& dst);
void split_master(Context& ctx, const Tensor& w, Tensor& high, Tensor& low);
void join_master(Context& ctx, const Tensor& high, const Tensor& low, Tensor& w);
bool conv2d_native(DType dtype);
ConvScratch conv2d_scratch_bytes(const ConvShape& s, DType dtype, bool accumulate);

}  // namespace kiln::ops::cpu
