// cuBLASLt is not loaded with kiln, only on first use (backend/cuda/cublaslt_library.h): CPU-only
// processes do not pay its start-up. Needs the toolkit's library, not a GPU.
#ifdef KILN_HAVE_CUDA
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "kiln/backend/cuda/cublaslt_library.h"

namespace kiln {
namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(library) != std::string::npos;
}

TEST(CublasLtLibrary, IsOpenedOnFirstUseWithEveryFunction) {
  ASSERT_FALSE(mapped("libcublasLt.so")) << "cuBLASLt was loaded before its first use";
  const ops::cuda::CublasLt& lt = ops::cuda::cublaslt();
  EXPECT_TRUE(mapped("libcublasLt.so"));
  EXPECT_NE(std::string(lt.GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)).find("not initialized"),
            std::string::npos);
  for (const void* fn : {(void*)lt.Create, (void*)lt.Matmul, (void*)lt.MatmulAlgoGetHeuristic,
                         (void*)lt.MatmulDescCreate, (void*)lt.MatmulDescDestroy, (void*)lt.MatmulDescSetAttribute,
                         (void*)lt.MatmulPreferenceCreate, (void*)lt.MatmulPreferenceDestroy,
                         (void*)lt.MatmulPreferenceSetAttribute, (void*)lt.MatrixLayoutCreate,
                         (void*)lt.MatrixLayoutDestroy, (void*)lt.MatrixLayoutSetAttribute})
    EXPECT_NE(fn, nullptr);
  EXPECT_EQ(&ops::cuda::cublaslt(), &lt);  // opened once
}

}  // namespace
}  // namespace kiln
#endif
