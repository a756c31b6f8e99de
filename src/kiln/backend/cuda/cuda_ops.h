// backend/cuda/cuda_ops.h — the CUDA backend's implementations of the op table (backend/ops.def,
// the list with the contracts); backend/dispatch.cc calls them for CUDA contexts.
#pragma once
#include "kiln/backend/backend.h"
#include "kiln/backend/graph.h"

namespace kiln::ops::cuda {

// Every op of backend/ops.def: one file of backend/cuda/ defines each.
#define KILN_OP(name, params, args) void name(Context& ctx, KILN_OP_PARAMS params);
#include "kiln/backend/ops.def"

// The ops with a dispatch of their own (backend.h), and what graph.cc and transfer.cc take.
void copy(Context& ctx, const Tensor& src, Tensor& dst);
// Page-locked host memory (cudaMallocHost) as a host tensor.
Tensor pinned_host_tensor(const Shape& shape, DType dtype);
void staged_copy(Context& ctx, const Tensor& host, Tensor& dst, HostStaging& staging);
// graph.cc: stream capture of the ops `body` issues on ctx's stream into an instantiated CUDA
// graph, not yet launched.
std::unique_ptr<OpGraph> capture_graph(Context& ctx, const std::function<void()>& body);

// Registers the backend (its allocator); called once at static initialisation.
void register_backend();

}  // namespace kiln::ops::cuda
