#include "kiln/dist/mpi/mpi_communicator.h"

// The C interface only: the C++ bindings need a library kiln does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kiln/core/error.h"

namespace kiln::dist {
namespace {

// Elements per gather-sum-broadcast round: bounds rank 0's buffer to size() x this.
constexpr int64_t kChunkElements = int64_t(1) << 20;
// Bytes per MPI call where MPI counts bytes in an int.
constexpr size_t kMaxBytes = size_t(1) << 30;

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error("{}: {}", call, std::string(text, size_t(length)));
}

// dst[i] = sum over r of src[r * n + i], r in rank order; f32 accumulates in f64.
template <typename T, typename Acc>
void sum_in_rank_order(const std::byte* src, int ranks, int64_t n, void* dst) {
  const T* x = reinterpret_cast<const T*>(src);
  T* y = static_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    Acc acc = Acc(x[i]);
    for (int r = 1; r < ranks; ++r) acc += Acc(x[int64_t(r) * n + i]);
    y[i] = T(acc);
  }
}

// Ends this process: its launcher (mpirun) then ends the others, and a rank waiting on this
// one expires in turn. Not MPI_Abort: the main thread is inside MPI, which this thread may not enter.
[[noreturn]] void expire(int rank, const char* op, double limit_seconds) {
  std::fprintf(stderr,
               "kiln: rank %d: error: %s waited more than %g s for the other ranks (--dist-timeout); "
               "a rank failed or hangs; ending every rank\n",
               rank, op, limit_seconds);
  std::fflush(stderr);
  std::_Exit(2);
}

}  // namespace

MpiCommunicator::MpiCommunicator()
    : watchdog_([this](const char* op, double limit) { expire(rank_, op, limit); }) {
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  check(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(node, &local_size_), "MPI_Comm_size");
  MPI_Comm_free(&node);
}

void MpiCommunicator::all_reduce_sum(Tensor& t) {
  check_collective_tensor(t, "all_reduce_sum");
  const Watchdog::Wait wait = watchdog_.wait("all_reduce_sum");
  const size_t element = dtype_size(t.dtype);
  auto* data = static_cast<std::byte*>(t.data);
  if (rank_ == 0) gathered_.resize(size_t(std::min(t.numel(), kChunkElements)) * element * size_t(size_));
  for (int64_t first = 0; first < t.numel(); first += kChunkElements) {
    const int64_t n = std::min(kChunkElements, t.numel() - first);
    const int bytes = int(size_t(n) * element);
    std::byte* chunk = data + size_t(first) * element;
    check(MPI_Gather(chunk, bytes, MPI_BYTE, gathered_.data(), bytes, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Gather");
    if (rank_ == 0) {
      switch (t.dtype) {
        case DType::f32: sum_in_rank_order<float, double>(gathered_.data(), size_, n, chunk); break;
        case DType::f64: sum_in_rank_order<double, double>(gathered_.data(), size_, n, chunk); break;
        default: sum_in_rank_order<int64_t, int64_t>(gathered_.data(), size_, n, chunk); break;
      }
    }
    check(MPI_Bcast(chunk, bytes, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
  }
}

void MpiCommunicator::broadcast(Tensor& t, int root) {
  check_collective_tensor(t, "broadcast");
  KILN_CHECK(root >= 0 && root < size_, "broadcast: root {} outside world size {}", root, size_);
  const Watchdog::Wait wait = watchdog_.wait("broadcast");
  auto* data = static_cast<std::byte*>(t.data);
  for (size_t first = 0; first < t.nbytes(); first += kMaxBytes) {
    const int bytes = int(std::min(kMaxBytes, t.nbytes() - first));
    check(MPI_Bcast(data + first, bytes, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
}

void MpiCommunicator::all_gather(const Tensor& in, Tensor& out) {
  check_collective_tensor(in, "all_gather");
  KILN_CHECK(out.dtype == in.dtype && out.numel() == in.numel() * size_,
             "all_gather: output has {} elements of {}, expected {} of {}", out.numel(),
             dtype_name(out.dtype), in.numel() * size_, dtype_name(in.dtype));
  KILN_CHECK(in.nbytes() <= size_t(INT_MAX), "all_gather: {} bytes per rank is more than MPI's int count",
             in.nbytes());
  const int bytes = int(in.nbytes());
  const Watchdog::Wait wait = watchdog_.wait("all_gather");
  check(MPI_Allgather(in.data, bytes, MPI_BYTE, out.data, bytes, MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
}

void MpiCommunicator::barrier() {
  const Watchdog::Wait wait = watchdog_.wait("barrier");
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

}  // namespace kiln::dist
