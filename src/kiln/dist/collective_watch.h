// dist/collective_watch.h — `--dist-timeout` for collectives that no host call waits on: NCCL
// queues them on a GPU stream and returns, and the host blocks later, anywhere (a copy of the
// loss, a synchronize), where dist/watchdog.h's Wait cannot be. So each collective leaves a
// Marker in its stream when it is queued, and a thread polls: markers that completed are
// dropped; the transport's asynchronous error (ncclCommGetAsyncError) ends the run at once;
// a marker older than the limit ends it after the limit. Ending: one line on stderr (the MPI
// watchdog's words), the transport aborted once (ncclCommAbort, which frees the kernels stuck
// waiting for a dead peer), then the process exits; mpirun ends the other ranks.
//
// The limit is counted from the moment the collective is queued, not from when the GPU reaches
// it, so it must exceed the time the host runs ahead of the GPU (about a step; the default 600 s
// does). A collective is held to the limit in force when it was queued or the one in force now,
// whichever is longer (0 being the longest): a save or an evaluation (--save-timeout) extends
// the collectives already waiting. Nothing here includes CUDA or NCCL; the unit test drives it
// with fakes.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::dist {

class CollectiveWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // A point in a stream just after one queued collective.
  class Marker {
   public:
    virtual ~Marker() = default;
    // Whether the stream has passed it (a marker that cannot be queried any more counts as
    // passed: the error then reaches the host through the stream's next call).
    virtual bool done() = 0;
  };

  // What the watch asks of the transport, from its own thread.
  class Transport {
   public:
    virtual ~Transport() = default;
    // The communicator's asynchronous error in words, "" while there is none.
    virtual std::string async_error() = 0;
    // Ends the communicator's work in flight. Called at most once.
    virtual void abort() = 0;
    // Called on the polling thread before its first poll (selects the GPU).
    virtual void enter_thread() {}
  };

  // say(line): prints the one-line error; exit(): ends the process. Both called once, in that
  // order around Transport::abort(), when the run must end.
  using Say = std::function<void(const std::string& line)>;
  using Exit = std::function<void()>;

  CollectiveWatch(int rank, Transport& transport, Say say, Exit exit);
  ~CollectiveWatch();
  CollectiveWatch(const CollectiveWatch&) = delete;
  CollectiveWatch& operator=(const CollectiveWatch&) = delete;

  // Polls every `interval` on a thread of its own until the watch is gone.
  void start(Clock::duration interval);

  // Seconds a collective may wait (0: forever; the asynchronous error is polled all the same).
  void set_limit(double seconds);
  double limit() const;

  // `op` (a string literal) was queued now; `marker` follows it in its stream.
  void queued(const char* op, std::unique_ptr<Marker> marker, Clock::time_point now = Clock::now());

  // One round: drops passed markers, then ends the run (say, abort, exit) on an asynchronous
  // error or a marker older than its limit at `now`. Returns whether it ended the run; after
  // that, further rounds do nothing.
  bool poll(Clock::time_point now);

  // Markers not yet passed (as of the last round).
  size_t pending() const;

 private:
  struct Queued {
    const char* op;
    Clock::time_point since;
    double limit;  // in force when queued
    std::unique_ptr<Marker> marker;
  };
  void end(const std::string& line);

  const int rank_;
  Transport& transport_;
  Say say_;
  Exit exit_;
  mutable std::mutex mutex_;
  std::vector<Queued> queued_;
  double limit_ = 0;
  bool ended_ = false;

  std::mutex thread_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kiln::dist
