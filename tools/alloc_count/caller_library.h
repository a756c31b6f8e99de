// tools/alloc_count/caller_library.h — whose code made a heap allocation: the shared object that
// holds the caller of operator new. Shared by the preload counter (alloc_count.cc) and the
// in-process test (tests/train/memory_test.cc).
#pragma once
#include <dlfcn.h>

#include <cstring>

namespace kiln::alloc_count {

enum class CallerLibrary { kiln, onednn, openmp, mpi };
constexpr int kCallerLibraries = 4;

// libdnnl is oneDNN, libgomp the OpenMP runtime, OpenMPI's own libraries MPI; anything else (the
// executable, which holds kiln, or libstdc++ on its behalf) counts as kiln's.
inline CallerLibrary caller_library(void* return_address) {
  Dl_info info{};
  const char* file = dladdr(return_address, &info) && info.dli_fname ? info.dli_fname : "";
  if (std::strstr(file, "libdnnl")) return CallerLibrary::onednn;
  if (std::strstr(file, "libgomp")) return CallerLibrary::openmp;
  for (const char* mpi : {"libmpi", "libopen-pal", "libopen-rte", "libpmix", "libucs", "libucp", "libhwloc"})
    if (std::strstr(file, mpi)) return CallerLibrary::mpi;
  return CallerLibrary::kiln;
}

}  // namespace kiln::alloc_count
