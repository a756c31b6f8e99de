// backend/cuda/matmul_search.h — which cuBLASLt algorithm runs a product, keyed by GPU, shapes,
// layouts, dtypes and epilogue: the winner kept in the algorithm cache file
// (backend/algo_cache.h), else with KILN_SEARCH on the fastest of cuBLASLt's first candidates
// timed on a scratch output (never inside a graph capture), else the heuristic's first. Called
// once per product: the matmul's plans (matmul.cc) keep the choice for the process. The key names
// the cuBLASLt version, so a new library searches again.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace kiln::ops::cuda {

// One cuBLASLt product, everything but its algorithm (cuBLASLt's operand order).
struct LtProduct {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  const void* alpha = nullptr;
  const void* beta = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  size_t c_offset = 0, c_tensor_bytes = 0;  // c's byte offset in its tensor, the tensor's size
  // Candidates timed into c itself (a pointer-array product with beta 0, whose tables address c;
  // the product then overwrites it), not into a scratch copy of c's tensor.
  bool time_in_place = false;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

cublasLtMatmulAlgo_t matmul_algorithm(const std::string& key, const LtProduct& p);

}  // namespace kiln::ops::cuda
