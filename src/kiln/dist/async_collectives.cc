#include "kiln/dist/async_collectives.h"

#include <exception>
#include <utility>

#include "kiln/dist/pooled_request.h"

namespace kiln::dist {

class LaneRequest final : public Request, public PooledRequest<LaneRequest> {
 public:
  LaneRequest(AsyncCollectives& owner, Tensor& t) : owner_(owner), tensor_(t) {}
  ~LaneRequest() override { owner_.wait_done(done_); }  // the tensor must outlive the collective
  void wait() override {
    owner_.wait_done(done_);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  friend class AsyncCollectives;
  AsyncCollectives& owner_;
  Tensor tensor_;
  LaneRequest* next_ = nullptr;  // the queue's next entry; guarded by owner_.mutex_
  bool done_ = false;            // guarded by owner_.mutex_
  std::exception_ptr error_;     // set by the thread before done_
};

AsyncCollectives::AsyncCollectives(std::unique_ptr<Communicator> lane)
    : lane_(std::move(lane)), thread_([this] { run(); }) {}

AsyncCollectives::~AsyncCollectives() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

std::unique_ptr<Request> AsyncCollectives::all_reduce_sum(Tensor& t) {
  auto request = std::make_unique<LaneRequest>(*this, t);
  {
    std::lock_guard lock(mutex_);
    (tail_ ? tail_->next_ : head_) = request.get();
    tail_ = request.get();
  }
  wake_.notify_one();
  return request;
}

void AsyncCollectives::wait_done(const bool& done) {
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return done; });
}

void AsyncCollectives::run() {
  for (;;) {
    LaneRequest* request;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || head_; });
      if (!head_) return;
      request = head_;
      head_ = request->next_;
      if (!head_) tail_ = nullptr;
    }
    try {
      lane_->all_reduce_sum(request->tensor_);
    } catch (...) {
      request->error_ = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      request->done_ = true;
    }
    finished_.notify_all();
  }
}

}  // namespace kiln::dist
