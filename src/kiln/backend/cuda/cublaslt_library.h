// backend/cuda/cublaslt_library.h — cuBLASLt, opened on first use (dlopen) instead of linked:
// loading it runs its static initialisers, about 0.4 s at the start of every process, CPU-only
// runs and each test process included.
#pragma once
#include <cublasLt.h>

namespace kiln::ops::cuda {

// The cuBLASLt functions kiln calls.
struct CublasLt {
  decltype(&cublasLtCreate) Create;
  decltype(&cublasLtGetStatusString) GetStatusString;
  decltype(&cublasLtGetVersion) GetVersion;
  decltype(&cublasLtMatmul) Matmul;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
};

// The library of the toolkit kiln was built with, opened once; throws naming the library file
// (or the missing function) when it cannot be opened.
const CublasLt& cublaslt();

}  // namespace kiln::ops::cuda
