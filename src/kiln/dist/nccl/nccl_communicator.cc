#include "kiln/dist/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/backend/cuda/runtime.h"
#include "kiln/core/error.h"
#include "kiln/dist/collective_watch.h"
#include "kiln/dist/nccl/nccl_library.h"
#include "kiln/dist/pooled_request.h"

namespace kiln::dist {
namespace {

using ops::cuda::check;

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error("NCCL: {}: {}", what, nccl().GetErrorString(r));
}

ncclDataType_t nccl_type(const Tensor& t, const char* op) {
  switch (t.dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i64: return ncclInt64;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    default: throw Error("{}: dtype {} is not supported (f32, f64, i64, bf16, f16)", op, dtype_name(t.dtype));
  }
}

// CUDA events for requests, reused: a pipeline step makes a few requests per micro-batch, and
// creating an event each time would allocate in the driver on every step. An event is recorded
// again only after its request is gone; waits already queued keep the record they saw.
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  cudaEvent_t take() {
    {
      const std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "NCCL request event");
    return e;
  }
  void give_back(cudaEvent_t e) {
    const std::lock_guard lock(mutex_);
    free_.push_back(e);
  }

 private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

// Done once the GPU has run what was queued before it: wait() makes `stream` wait for that. It
// must be gone before the communicator whose pool it draws from.
class EventRequest final : public Request, public PooledRequest<EventRequest> {
 public:
  EventRequest(EventPool& pool, cudaStream_t after, cudaStream_t stream)
      : pool_(pool), done_(pool.take()), stream_(stream) {
    check(cudaEventRecord(done_, after), "NCCL request event");
  }
  ~EventRequest() override { pool_.give_back(done_); }
  void wait() override { check(cudaStreamWaitEvent(stream_, done_, 0), "NCCL request wait"); }

 private:
  EventPool& pool_;
  cudaEvent_t done_;
  cudaStream_t stream_;
};

// The watch's marker (dist/collective_watch.h): an event recorded after a collective in its stream.
class EventMarker final : public CollectiveWatch::Marker {
 public:
  EventMarker(EventPool& pool, cudaStream_t stream) : pool_(pool), event_(pool.take()) {
    check(cudaEventRecord(event_, stream), "NCCL watch event");
  }
  ~EventMarker() override { pool_.give_back(event_); }
  // cudaErrorNotReady while the stream has not reached it; any other error counts as passed (the
  // stream's next call on the host reports it).
  bool done() override { return cudaEventQuery(event_) != cudaErrorNotReady; }

 private:
  EventPool& pool_;
  cudaEvent_t event_;
};

// How often the watch polls the queued collectives and NCCL's asynchronous error.
constexpr std::chrono::milliseconds kWatchInterval{100};

class NcclCommunicator final : public Communicator, private CollectiveWatch::Transport {
 public:
  NcclCommunicator(Communicator& host, Device device) : host_(host), device_(device) { init(); }
  NcclCommunicator(std::unique_ptr<Communicator> owned, Device device)
      : owned_(std::move(owned)), host_(*owned_), device_(device) {
    init();
  }
  ~NcclCommunicator() override {
    watch_.reset();  // its thread polls comm_ and holds events of events_
    if (comm_) nccl().CommDestroy(comm_);
    if (overlap_stream_) cudaStreamDestroy(overlap_stream_);
  }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  int local_rank() const override { return host_.local_rank(); }
  int local_size() const override { return host_.local_size(); }
  bool can_overlap() const override { return true; }
  bool can_capture() const override { return true; }
  void barrier() override {
    watch("barrier", stream_);
    check(cudaStreamSynchronize(stream_), "NCCL barrier");
    host_.barrier();
  }
  // The host communicator's watchdog for host tensors, the watch for what NCCL queues.
  void set_timeout(double seconds) override {
    host_.set_timeout(seconds);
    watch_->set_limit(seconds);
  }
  double timeout() const override { return watch_->limit(); }

  void all_reduce_sum(Tensor& t) override {
    if (!on_device(t, "all_reduce_sum")) return host_.all_reduce_sum(t);
    check_nccl(nccl().AllReduce(t.data, t.data, size_t(t.numel()), nccl_type(t, "all_reduce_sum"), ncclSum, comm_,
                                stream_),
               "all_reduce_sum");
    watch("all_reduce_sum", stream_);
  }

  std::unique_ptr<Request> iall_reduce_sum(Tensor& t) override {
    if (!on_device(t, "iall_reduce_sum")) return host_.iall_reduce_sum(t);
    EventRequest ready(events_, stream_, overlap_stream_);  // the gradient is final on the op stream
    ready.wait();
    check_nccl(nccl().AllReduce(t.data, t.data, size_t(t.numel()), nccl_type(t, "iall_reduce_sum"), ncclSum, comm_,
                                overlap_stream_),
               "iall_reduce_sum");
    watch("all_reduce_sum", overlap_stream_);
    return std::make_unique<EventRequest>(events_, overlap_stream_, stream_);
  }

  void broadcast(Tensor& t, int root) override {
    if (!on_device(t, "broadcast")) return host_.broadcast(t, root);
    check_nccl(nccl().Broadcast(t.data, t.data, size_t(t.numel()), nccl_type(t, "broadcast"), root, comm_, stream_),
               "broadcast");
    watch("broadcast", stream_);
  }

  void all_gather(const Tensor& in, Tensor& out) override {
    if (!on_pair(in, out, "all_gather")) return host_.all_gather(in, out);
    check_nccl(nccl().AllGather(in.data, out.data, size_t(in.numel()), nccl_type(in, "all_gather"), comm_, stream_),
               "all_gather");
    watch("all_gather", stream_);
  }

  void reduce_scatter_sum(const Tensor& in, Tensor& out) override {
    if (!on_pair(in, out, "reduce_scatter_sum")) return host_.reduce_scatter_sum(in, out);
    check_nccl(nccl().ReduceScatter(in.data, out.data, size_t(out.numel()), nccl_type(in, "reduce_scatter_sum"),
                                    ncclSum, comm_, stream_),
               "reduce_scatter_sum");
    watch("reduce_scatter_sum", stream_);
  }

  std::unique_ptr<Request> isend(const Tensor& t, int peer) override {
    if (!on_device(t, "send")) return host_.isend(t, peer);
    check_nccl(nccl().Send(t.data, t.nbytes(), ncclUint8, peer, comm_, stream_), "send");
    watch("send", stream_);
    return std::make_unique<EventRequest>(events_, stream_, stream_);
  }

  std::unique_ptr<Request> irecv(Tensor& t, int peer) override {
    if (!on_device(t, "receive")) return host_.irecv(t, peer);
    check_nccl(nccl().Recv(t.data, t.nbytes(), ncclUint8, peer, comm_, stream_), "receive");
    watch("receive", stream_);
    return std::make_unique<EventRequest>(events_, stream_, stream_);
  }

  void group_start() override {
    check_nccl(nccl().GroupStart(), "group start");
    ++group_depth_;
  }
  // A group's calls reach their stream at the outermost group end: their markers follow them then.
  void group_end() override {
    check_nccl(nccl().GroupEnd(), "group end");
    if (group_depth_ > 0 && --group_depth_ == 0) {
      std::vector<std::pair<const char*, cudaStream_t>> grouped = std::move(grouped_);
      grouped_.clear();
      for (const auto& [op, stream] : grouped) watch(op, stream);
    }
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    return std::make_unique<NcclCommunicator>(host_.split(color, key), device_);
  }

 private:
  // Rank 0's unique id, broadcast as 16 i64 over the host communicator; then this GPU joins.
  void init() {
    ops::cuda::require_device(device_);
    check(cudaSetDevice(device_.index), "NCCL: select the device");
    stream_ = ops::cuda::device_stream(device_.index);
    check(cudaStreamCreateWithFlags(&overlap_stream_, cudaStreamNonBlocking), "NCCL: overlap stream");
    static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
    int64_t words[sizeof(ncclUniqueId) / sizeof(int64_t)] = {};
    ncclUniqueId id{};
    if (host_.rank() == 0) {
      check_nccl(nccl().GetUniqueId(&id), "unique id");
      std::memcpy(words, &id, sizeof(id));
    }
    Tensor shared = Tensor::view(words, {int64_t(std::size(words))}, DType::i64);
    host_.broadcast(shared, 0);
    std::memcpy(&id, words, sizeof(id));
    check_nccl(nccl().CommInitRank(&comm_, host_.size(), id, host_.rank()), "join the communicator");
    watch_.emplace(
        host_.rank(), static_cast<CollectiveWatch::Transport&>(*this),
        [](const std::string& line) {
          std::fprintf(stderr, "%s\n", line.c_str());
          std::fflush(stderr);
        },
        [] { std::_Exit(2); });  // as the MPI watchdog: mpirun then ends the other ranks
    watch_->set_limit(host_.timeout());  // a split's inherits its parent's
    watch_->start(kWatchInterval);
  }

  // `op` was just queued on `stream`: the watch follows it there. Not inside a graph capture
  // (the replays are not seen here; NCCL's asynchronous error still is), and inside a group only
  // at its end, when NCCL queues it.
  void watch(const char* op, cudaStream_t stream) {
    if (group_depth_ > 0) {
      grouped_.emplace_back(op, stream);
      return;
    }
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(stream, &capture), "NCCL watch");
    if (capture != cudaStreamCaptureStatusNone) return;
    watch_->queued(op, std::make_unique<EventMarker>(events_, stream));
  }

  // CollectiveWatch::Transport, called on the watch's thread.
  std::string async_error() override {
    ncclResult_t error = ncclSuccess;
    if (const ncclResult_t r = nccl().CommGetAsyncError(comm_, &error); r != ncclSuccess) error = r;
    return error == ncclSuccess || error == ncclInProgress ? std::string() : nccl().GetErrorString(error);
  }
  void abort() override { nccl().CommAbort(comm_); }
  void enter_thread() override { cudaSetDevice(device_.index); }

  // True for a tensor on this communicator's GPU, false for a host tensor; throws for another device.
  bool on_device(const Tensor& t, const char* op) const {
    if (t.device.is_cpu()) return false;
    KILN_CHECK(t.device == device_, "{}: a tensor on {} for the NCCL communicator of {}", op, t.device.str(),
               device_.str());
    return true;
  }

  // Both on this GPU (true) or both on the host (false): NCCL takes no mixed pair.
  bool on_pair(const Tensor& in, const Tensor& out, const char* op) const {
    check_same_side(op, in, out);
    return on_device(in, op) && on_device(out, op);
  }

  std::unique_ptr<Communicator> owned_;  // a split's own host communicator
  Communicator& host_;
  Device device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;          // the GPU's op stream
  cudaStream_t overlap_stream_ = nullptr;  // iall_reduce_sum's
  EventPool events_;                       // for this communicator's requests and the watch's markers
  int group_depth_ = 0;                    // group_start()s not yet ended
  std::vector<std::pair<const char*, cudaStream_t>> grouped_;  // collectives of the open group
  std::optional<CollectiveWatch> watch_;   // --dist-timeout; made once comm_ is
};

}  // namespace

std::unique_ptr<Communicator> nccl_communicator(Communicator& host, Device device) {
  return std::make_unique<NcclCommunicator>(host, device);
}

}  // namespace kiln::dist
