// dist/async_collectives.h — non-blocking collectives on a thread of their own: each request runs
// a blocking collective of `lane` while the caller computes. `lane` is a communicator that only
// this thread uses (MPI orders collectives per communicator; the caller's own collectives go on
// the other one), so every rank runs the requests in the order they were started. A request is
// its own queue entry (an intrusive list) and reuses freed requests' memory, so starting one
// allocates nothing once a step has run.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "kiln/dist/communicator.h"

namespace kiln::dist {

class AsyncCollectives {
 public:
  explicit AsyncCollectives(std::unique_ptr<Communicator> lane);
  ~AsyncCollectives();  // runs the requests still queued, then ends the thread; requests must be gone
  AsyncCollectives(const AsyncCollectives&) = delete;
  AsyncCollectives& operator=(const AsyncCollectives&) = delete;

  // lane.all_reduce_sum(t) on the thread; the request's wait() rethrows its error.
  std::unique_ptr<Request> all_reduce_sum(Tensor& t);

 private:
  friend class LaneRequest;
  void run();
  void wait_done(const bool& done);  // until the thread has set `done`

  std::unique_ptr<Communicator> lane_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  class LaneRequest* head_ = nullptr;  // queued, oldest first; guarded by mutex_
  class LaneRequest* tail_ = nullptr;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kiln::dist
