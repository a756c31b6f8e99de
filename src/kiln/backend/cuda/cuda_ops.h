// backend/cuda/cuda_ops.h — the ops the CUDA backend implements so far (contracts in
// backend/backend.h); backend/dispatch.cc calls them for CUDA contexts.
#pragma once
#include "kiln/backend/backend.h"

namespace kiln::ops::cuda {

void fill(Context& ctx, Tensor& t, float value);
void copy(Context& ctx, const Tensor& src, Tensor& dst);
void cast(Context& ctx, const Tensor& src, Tensor& dst);
void matmul(Context& ctx, const MatView& a, const MatView& b, const MatView& c,
            const MatmulOpts& opts);
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
void scale(Context& ctx, const Tensor& x, float s, Tensor& y);
void gelu_forward(Context& ctx, GeluKind kind, const Tensor& x, Tensor& y);
void gelu_backward(Context& ctx, GeluKind kind, const Tensor& x, const Tensor& dy, Tensor& dx);
void dropout_forward(Context& ctx, const Tensor& x, float p, const RngStream& rng,
                     uint64_t sample_offset, int64_t samples, Tensor& y);
void dropout_backward(Context& ctx, const Tensor& dy, float p, const RngStream& rng,
                      uint64_t sample_offset, int64_t samples, Tensor& dx);
void softmax_forward(Context& ctx, const Tensor& x, Tensor& y);
void layernorm_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                       float eps, Tensor& y, Tensor& mean, Tensor& rstd);

// Registers the backend (its allocator); called once at static initialisation.
void register_backend();

}  // namespace kiln::ops::cuda
