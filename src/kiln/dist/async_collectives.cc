#include "kiln/dist/async_collectives.h"

namespace kiln::dist {
namespace {

class FutureRequest final : public Request {
 public:
  explicit FutureRequest(std::future<void> done) : done_(std::move(done)) {}
  ~FutureRequest() override {
    if (done_.valid()) done_.wait();  // the tensor must outlive the collective
  }
  void wait() override { done_.get(); }

 private:
  std::future<void> done_;
};

}  // namespace

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
  std::packaged_task<void()> task([this, t]() mutable { lane_->all_reduce_sum(t); });
  auto request = std::make_unique<FutureRequest>(task.get_future());
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
  return request;
}

void AsyncCollectives::run() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace kiln::dist
