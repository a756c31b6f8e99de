#include "kiln/backend/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <string>

#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// The soname of the major version kiln was compiled against, then the toolkit's own copy.
void* open_library() {
  const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  if (void* h = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const std::string in_toolkit = std::string(KILN_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void* h = ::dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  throw Error("cuBLASLt: cannot open {} (nor {}): {}", soname, in_toolkit, ::dlerror());
}

template <typename F>
void bind(void* library, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(library, name));
  if (!fn) throw Error("cuBLASLt: the library has no {}", name);
}

CublasLt load() {
  void* h = open_library();
  CublasLt lt{};
  bind(h, "cublasLtCreate", lt.Create);
  bind(h, "cublasLtGetStatusString", lt.GetStatusString);
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
