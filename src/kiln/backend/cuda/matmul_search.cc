#include "kiln/backend/cuda/matmul_search.h"

#include "kiln/backend/algo_cache.h"
#include "kiln/backend/cuda/cublaslt_library.h"
#include "kiln/backend/cuda/runtime.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

constexpr int kCandidates = 8;
constexpr int kTimedRuns = 3;

// Milliseconds per run of candidate `algo` into `out` (a scratch copy of C's tensor), -1 when it
// does not run.
double time_candidate(const LtProduct& p, const cublasLtMatmulAlgo_t& algo, void* out) {
  auto run = [&] {
    return cublaslt().Matmul(p.handle, p.desc, p.alpha, p.a, p.la, p.b, p.lb, p.beta, out, p.lc, out, p.lc, &algo,
                             p.workspace, p.workspace_bytes, p.stream);
  };
  if (run() != CUBLAS_STATUS_SUCCESS) return -1;  // the warm-up
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "matmul search");
  check(cudaEventCreate(&stop), "matmul search");
  check(cudaEventRecord(start, p.stream), "matmul search");
  bool ok = true;
  for (int i = 0; i < kTimedRuns && ok; ++i) ok = run() == CUBLAS_STATUS_SUCCESS;
  check(cudaEventRecord(stop, p.stream), "matmul search");
  check(cudaEventSynchronize(stop), "matmul search");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "matmul search");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ok ? double(ms) / kTimedRuns : -1;
}

// The fastest of `found` candidates, timed on a scratch copy of C's tensor (or on C itself, see
// LtProduct); -1 when none ran.
int search(const LtProduct& p, const cublasLtMatmulHeuristicResult_t* results, int found) {
  if (p.time_in_place)
    return fastest_candidate(found, [&](int i) { return time_candidate(p, results[i].algo, p.c); });
  void* scratch = nullptr;
  check(cudaMalloc(&scratch, p.c_tensor_bytes), "matmul search output");
  void* out = static_cast<std::byte*>(scratch) + p.c_offset;
  const int best = fastest_candidate(found, [&](int i) { return time_candidate(p, results[i].algo, out); });
  cudaFree(scratch);
  return best;
}

}  // namespace

cublasLtMatmulAlgo_t matmul_algorithm(const std::string& key, const LtProduct& p) {
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const int wanted = algorithm_search_enabled() ? kCandidates : 1;
  const cublasStatus_t status = cublaslt().MatmulAlgoGetHeuristic(p.handle, p.desc, p.la, p.lb, p.lc, p.lc,
                                                                  p.preference, wanted, results, &found);
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("op matmul: cuBLASLt heuristic: {} ({})", cublaslt().GetStatusString(status), key);
  KILN_CHECK(found > 0, "op matmul: cuBLASLt has no algorithm for {}", key);
  const int pick = choose_candidate(AlgoCache::process(), key, found, capturing(p.stream, "matmul search"),
                                    [&] { return search(p, results, found); });
  KILN_CHECK(pick >= 0, "op matmul: none of cuBLASLt's {} candidates ran ({})", found, key);
  return results[pick].algo;
}

}  // namespace kiln::ops::cuda
