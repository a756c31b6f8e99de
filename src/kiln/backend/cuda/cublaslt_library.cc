#include "kiln/backend/cuda/cublaslt_library.h"

#include <string>

#include "kiln/core/shared_library.h"

namespace kiln::ops::cuda {
namespace {

template <typename F>
void bind(void* library, const char* name, F& fn) {
  bind_symbol(library, "cuBLASLt", name, fn);
}

// The soname of the major version kiln was compiled against, then the toolkit's own copy.
CublasLt load() {
  const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* h = open_shared_library("cuBLASLt", {soname, std::string(KILN_CUDA_LIBRARY_DIR) + "/" + soname});
  CublasLt lt{};
  bind(h, "cublasLtCreate", lt.Create);
  bind(h, "cublasLtGetStatusString", lt.GetStatusString);
  bind(h, "cublasLtGetVersion", lt.GetVersion);
  bind(h, "cublasLtMatmul", lt.Matmul);
  bind(h, "cublasLtMatmulAlgoGetHeuristic", lt.MatmulAlgoGetHeuristic);
  bind(h, "cublasLtMatmulDescCreate", lt.MatmulDescCreate);
  bind(h, "cublasLtMatmulDescDestroy", lt.MatmulDescDestroy);
  bind(h, "cublasLtMatmulDescSetAttribute", lt.MatmulDescSetAttribute);
  bind(h, "cublasLtMatmulPreferenceCreate", lt.MatmulPreferenceCreate);
  bind(h, "cublasLtMatmulPreferenceDestroy", lt.MatmulPreferenceDestroy);
  bind(h, "cublasLtMatmulPreferenceSetAttribute", lt.MatmulPreferenceSetAttribute);
  bind(h, "cublasLtMatrixLayoutCreate", lt.MatrixLayoutCreate);
  bind(h, "cublasLtMatrixLayoutDestroy", lt.MatrixLayoutDestroy);
  bind(h, "cublasLtMatrixLayoutSetAttribute", lt.MatrixLayoutSetAttribute);
  return lt;
}

}  // namespace

const CublasLt& cublaslt() {
  static const CublasLt lt = load();  // thread-safe; a failed load throws again on the next call
  return lt;
}

}  // namespace kiln::ops::cuda
