#include "kiln/dist/mpi/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kiln/core/error.h"
#include "kiln/dist/pooled_request.h"

namespace kiln::dist {
namespace {

// Elements each rank sums per all_reduce_sum round: bounds the buffers to 2 x size() x this.
constexpr int64_t kShareElements = int64_t(1) << 18;
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

// The same for 16-bit floats: each element widened, summed in f64, rounded once.
template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
void sum_halves_in_rank_order(const std::byte* src, int ranks, int64_t n, void* dst) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(src);
  uint16_t* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    double acc = widen(x[i]);
    for (int r = 1; r < ranks; ++r) acc += widen(x[int64_t(r) * n + i]);
    y[i] = narrow(float(acc));
  }
}

void sum_in_rank_order(DType dtype, const std::byte* src, int ranks, int64_t n, void* dst) {
  switch (dtype) {
    case DType::bf16: sum_halves_in_rank_order<bf16_to_f32, f32_to_bf16>(src, ranks, n, dst); break;
    case DType::f16: sum_halves_in_rank_order<f16_to_f32, f32_to_f16>(src, ranks, n, dst); break;
    case DType::f32: sum_in_rank_order<float, double>(src, ranks, n, dst); break;
    case DType::f64: sum_in_rank_order<double, double>(src, ranks, n, dst); break;
    default: sum_in_rank_order<int64_t, int64_t>(src, ranks, n, dst); break;
  }
}

int byte_count(const Tensor& t, const char* op) {
  KILN_CHECK(t.device.is_cpu(), "{}: tensors must be on the host, got {}", op, t.device.str());
  KILN_CHECK(t.nbytes() <= size_t(INT_MAX), "{}: {} bytes is more than MPI's int count", op, t.nbytes());
  return int(t.nbytes());
}

class MpiRequest final : public Request, public PooledRequest<MpiRequest> {
 public:
  MpiRequest(Watchdog& watchdog, const char* op) : watchdog_(watchdog), op_(op) {}
  ~MpiRequest() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    const Watchdog::Wait wait = watchdog_.wait(op_);
    check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
  }
  MPI_Request request_ = MPI_REQUEST_NULL;

 private:
  Watchdog& watchdog_;
  const char* op_;
};

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

MpiCommunicator::MpiCommunicator(MPI_Comm comm)
    : comm_(comm), watchdog_([this](const char* op, double limit) { expire(rank_, op, limit); }) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  MPI_Comm node;
  check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  check(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(node, &local_size_), "MPI_Comm_size");
  MPI_Comm_free(&node);
  int level = MPI_THREAD_SINGLE;
  check(MPI_Query_thread(&level), "MPI_Query_thread");
  threads_ = level == MPI_THREAD_MULTIPLE;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_WORLD && !finalized) MPI_Comm_free(&comm_);
}

void MpiCommunicator::set_timeout(double seconds) {
  timeout_seconds_ = seconds;
  watchdog_.set_limit(seconds);
}

void MpiCommunicator::all_reduce_sum(Tensor& t) {
  check_collective_tensor(t, "all_reduce_sum");
  const Watchdog::Wait wait = watchdog_.wait("all_reduce_sum");
  const size_t element = dtype_size(t.dtype);
  auto* data = static_cast<std::byte*>(t.data);
  for (int64_t first = 0; first < t.numel(); first += kShareElements * size_) {
    const int64_t n = std::min(kShareElements * size_, t.numel() - first);
    const int64_t share = (n + size_ - 1) / size_;
    const size_t share_bytes = size_t(share) * element, bytes = size_t(n) * element;
    outgoing_.resize(share_bytes * size_t(size_));
    std::memcpy(outgoing_.data(), data + size_t(first) * element, bytes);
    std::memset(outgoing_.data() + bytes, 0, outgoing_.size() - bytes);  // the last share's padding
    shares_.resize(outgoing_.size());
    summed_.resize(share_bytes);
    check(MPI_Alltoall(outgoing_.data(), int(share_bytes), MPI_BYTE, shares_.data(), int(share_bytes), MPI_BYTE, comm_),
          "MPI_Alltoall");
    sum_in_rank_order(t.dtype, shares_.data(), size_, share, summed_.data());
    check(MPI_Allgather(summed_.data(), int(share_bytes), MPI_BYTE, outgoing_.data(), int(share_bytes), MPI_BYTE, comm_),
          "MPI_Allgather");
    std::memcpy(data + size_t(first) * element, outgoing_.data(), bytes);
  }
}

std::unique_ptr<Request> MpiCommunicator::iall_reduce_sum(Tensor& t) {
  if (!can_overlap()) return Communicator::iall_reduce_sum(t);
  check_collective_tensor(t, "all_reduce_sum");
  if (!async_) async_ = std::make_unique<AsyncCollectives>(split(0, rank_));
  return async_->all_reduce_sum(t);
}

void MpiCommunicator::broadcast(Tensor& t, int root) {
  check_collective_tensor(t, "broadcast");
  KILN_CHECK(root >= 0 && root < size_, "broadcast: root {} outside world size {}", root, size_);
  const Watchdog::Wait wait = watchdog_.wait("broadcast");
  auto* data = static_cast<std::byte*>(t.data);
  for (size_t first = 0; first < t.nbytes(); first += kMaxBytes) {
    const int bytes = int(std::min(kMaxBytes, t.nbytes() - first));
    check(MPI_Bcast(data + first, bytes, MPI_BYTE, root, comm_), "MPI_Bcast");
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
  // `in` may already sit at this rank's place in `out` (a sharded buffer gathered in place).
  const bool in_place = in.data == static_cast<std::byte*>(out.data) + size_t(rank_) * size_t(bytes);
  check(MPI_Allgather(in_place ? MPI_IN_PLACE : in.data, bytes, MPI_BYTE, out.data, bytes, MPI_BYTE, comm_),
        "MPI_Allgather");
}

void MpiCommunicator::barrier() {
  const Watchdog::Wait wait = watchdog_.wait("barrier");
  check(MPI_Barrier(comm_), "MPI_Barrier");
}

void MpiCommunicator::reduce_scatter_sum(const Tensor& in, Tensor& out) {
  check_collective_tensor(in, "reduce_scatter_sum");
  KILN_CHECK(out.dtype == in.dtype && in.numel() == out.numel() * size_,
             "reduce_scatter_sum: input has {} elements of {}, expected {} x {} of {}", in.numel(),
             dtype_name(in.dtype), size_, out.numel(), dtype_name(out.dtype));
  const int bytes = byte_count(out, "reduce_scatter_sum");
  // Rank r's share of every rank's input arrives at r in rank order; r adds them in that order.
  shares_.resize(size_t(bytes) * size_t(size_));
  {
    const Watchdog::Wait wait = watchdog_.wait("reduce_scatter_sum");
    check(MPI_Alltoall(in.data, bytes, MPI_BYTE, shares_.data(), bytes, MPI_BYTE, comm_), "MPI_Alltoall");
  }
  sum_in_rank_order(out.dtype, shares_.data(), size_, out.numel(), out.data);
}

std::unique_ptr<Request> MpiCommunicator::isend(const Tensor& t, int peer) {
  KILN_CHECK(peer >= 0 && peer < size_ && peer != rank_, "send: rank {} cannot send to rank {} of {}", rank_, peer, size_);
  auto r = std::make_unique<MpiRequest>(watchdog_, "send");
  check(MPI_Isend(t.data, byte_count(t, "send"), MPI_BYTE, peer, 0, comm_, &r->request_), "MPI_Isend");
  return r;
}

std::unique_ptr<Request> MpiCommunicator::irecv(Tensor& t, int peer) {
  KILN_CHECK(peer >= 0 && peer < size_ && peer != rank_, "receive: rank {} cannot receive from rank {} of {}", rank_,
             peer, size_);
  auto r = std::make_unique<MpiRequest>(watchdog_, "receive");
  check(MPI_Irecv(t.data, byte_count(t, "receive"), MPI_BYTE, peer, 0, comm_, &r->request_), "MPI_Irecv");
  return r;
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm part;
  {
    const Watchdog::Wait wait = watchdog_.wait("split");
    check(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split");
  }
  auto group = std::make_unique<MpiCommunicator>(part);
  group->set_timeout(timeout_seconds_);
  return group;
}

}  // namespace kiln::dist
