// tools/alloc_count/alloc_count.cc — libkiln_alloc_count.so, an LD_PRELOAD library that counts a
// process's operator new calls by the library of their caller (caller_library.h) and, at exit,
// writes the counts to $KILN_ALLOC_COUNT_DIR/rank<R>.txt (R: the MPI world rank, or the process
// id outside mpirun) as `kiln N onednn N openmp N mpi N`. Two runs of N and 2N steps then differ
// only by what N steps allocate: tests/dist/mpi_host_allocations_test.cc checks every parallel
// layout that way, and a user can check a run of their own:
//   LD_PRELOAD=build/libkiln_alloc_count.so KILN_ALLOC_COUNT_DIR=/tmp/counts kiln train ...
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "tools/alloc_count/caller_library.h"

namespace {
using kiln::alloc_count::CallerLibrary;
using kiln::alloc_count::kCallerLibraries;

std::atomic<long long> g_news[kCallerLibraries];

void* counted(std::size_t n, std::size_t alignment, void* caller) {
  g_news[int(kiln::alloc_count::caller_library(caller))].fetch_add(1, std::memory_order_relaxed);
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(n ? n : 1)
                : std::aligned_alloc(alignment, (n + alignment - 1) / alignment * alignment);
  if (!p) throw std::bad_alloc();
  return p;
}

std::string count_file(const char* dir) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return std::string(dir) + "/rank" + (rank ? std::string(rank) : std::to_string(::getpid())) + ".txt";
}

__attribute__((destructor)) void write_counts() {
  const char* dir = std::getenv("KILN_ALLOC_COUNT_DIR");
  if (!dir) return;
  long long news[kCallerLibraries];  // read before count_file allocates
  for (int i = 0; i < kCallerLibraries; ++i) news[i] = g_news[i].load();
  if (std::FILE* f = std::fopen(count_file(dir).c_str(), "w")) {
    std::fprintf(f, "kiln %lld onednn %lld openmp %lld mpi %lld\n", news[int(CallerLibrary::kiln)],
                 news[int(CallerLibrary::onednn)], news[int(CallerLibrary::openmp)], news[int(CallerLibrary::mpi)]);
    std::fclose(f);
  }
}
}  // namespace

void* operator new(std::size_t n) { return counted(n, 0, __builtin_return_address(0)); }
void* operator new[](std::size_t n) { return counted(n, 0, __builtin_return_address(0)); }
void* operator new(std::size_t n, std::align_val_t a) {
  return counted(n, std::size_t(a), __builtin_return_address(0));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted(n, std::size_t(a), __builtin_return_address(0));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
