#include "kiln/dist/watchdog.h"

#include <utility>

namespace kiln::dist {

Watchdog::Watchdog(Expiry on_expiry) : on_expiry_(std::move(on_expiry)), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::set_limit(double seconds) {
  {
    std::lock_guard lock(mutex_);
    limit_seconds_ = seconds;
  }
  wake_.notify_all();
}

Watchdog::Wait Watchdog::wait(const char* op) {
  {
    std::lock_guard lock(mutex_);
    op_ = op;
    since_ = Clock::now();
  }
  wake_.notify_all();
  return Wait(*this);
}

Watchdog::Wait::~Wait() {
  std::lock_guard lock(watchdog_.mutex_);
  watchdog_.op_ = nullptr;
}

void Watchdog::watch() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (!op_ || limit_seconds_ <= 0 || expired_) {
      wake_.wait(lock);
      continue;
    }
    const auto deadline = since_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_seconds_));
    const char* op = op_;
    const auto since = since_;
    if (wake_.wait_until(lock, deadline) != std::cv_status::timeout) continue;
    if (stop_ || op_ != op || since_ != since) continue;  // that wait ended or another began
    expired_ = true;
    const double limit = limit_seconds_;
    lock.unlock();
    on_expiry_(op, limit);
    lock.lock();
  }
}

}  // namespace kiln::dist
