// The CUDA driver's and the libraries' versions (backend/cuda/runtime.h's library_versions).
#include <fmt/format.h>

#include "kiln/backend/cuda/cublaslt_library.h"
#include "kiln/backend/cuda/runtime.h"
#include "kiln/core/error.h"
#ifdef KILN_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace kiln::ops::cuda {
namespace {

// 12080 -> "12.8" (the driver's and the runtime's major * 1000 + minor * 10).
std::string cuda_version(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }
// 120604 -> "12.6.4" (cuBLASLt's and cuDNN 9's major * 10000 + minor * 100 + patch).
std::string library_version(size_t v) { return fmt::format("{}.{}.{}", v / 10000, v % 10000 / 100, v % 100); }

std::string driver_line() {
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) return "CUDA driver: none";
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  return fmt::format("CUDA driver: {} (runtime {}, built with {})", cuda_version(driver), cuda_version(runtime),
                     cuda_version(CUDART_VERSION));
}

std::string cublaslt_line() {
  try {
    return "cuBLASLt: " + library_version(cublaslt().GetVersion());
  } catch (const Error& e) {
    return fmt::format("cuBLASLt: not loaded ({})", e.what());
  }
}

std::string cudnn_line() {
#ifdef KILN_HAVE_CUDNN
  return "cuDNN: " + library_version(cudnnGetVersion());
#else
  return "cuDNN: not built in";
#endif
}

}  // namespace

std::vector<std::string> library_versions() { return {driver_line(), cublaslt_line(), cudnn_line()}; }

}  // namespace kiln::ops::cuda
