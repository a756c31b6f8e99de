#include "kiln/dist/collective_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace kiln::dist {
namespace {

// The longer of two limits, 0 (forever) being the longest.
double longer(double a, double b) { return a <= 0 || b <= 0 ? 0 : std::max(a, b); }

}  // namespace

CollectiveWatch::CollectiveWatch(int rank, Transport& transport, Say say, Exit exit)
    : rank_(rank), transport_(transport), say_(std::move(say)), exit_(std::move(exit)) {}

CollectiveWatch::~CollectiveWatch() {
  {
    std::lock_guard lock(thread_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatch::start(Clock::duration interval) {
  thread_ = std::thread([this, interval] {
    transport_.enter_thread();
    std::unique_lock lock(thread_mutex_);
    while (!stop_) {
      if (wake_.wait_for(lock, interval, [this] { return stop_; })) break;
      lock.unlock();
      const bool ended = poll(Clock::now());
      lock.lock();
      if (ended) break;
    }
  });
}

void CollectiveWatch::set_limit(double seconds) {
  std::lock_guard lock(mutex_);
  limit_ = seconds;
}

double CollectiveWatch::limit() const {
  std::lock_guard lock(mutex_);
  return limit_;
}

void CollectiveWatch::queued(const char* op, std::unique_ptr<Marker> marker, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (ended_) return;
  queued_.push_back({op, now, limit_, std::move(marker)});
}

size_t CollectiveWatch::pending() const {
  std::lock_guard lock(mutex_);
  return queued_.size();
}

bool CollectiveWatch::poll(Clock::time_point now) {
  std::string line;
  {
    std::lock_guard lock(mutex_);
    if (ended_) return false;
    std::erase_if(queued_, [](Queued& q) { return q.marker->done(); });
    if (const std::string error = transport_.async_error(); !error.empty()) {
      line = queued_.empty()
                 ? fmt::format("kiln: rank {}: error: NCCL: {} (asynchronous error); ending every rank", rank_, error)
                 : fmt::format("kiln: rank {}: error: NCCL: {} failed: {} (asynchronous error); ending every rank",
                               rank_, queued_.front().op, error);
    } else {
      for (const Queued& q : queued_) {
        const double limit = longer(q.limit, limit_);
        if (limit <= 0 || std::chrono::duration<double>(now - q.since).count() <= limit) continue;
        line = fmt::format(
            "kiln: rank {}: error: {} waited more than {:g} s for the other ranks (--dist-timeout); a rank failed "
            "or hangs; ending every rank",
            rank_, q.op, limit);
        break;
      }
    }
    if (line.empty()) return false;
    ended_ = true;
  }
  end(line);
  return true;
}

void CollectiveWatch::end(const std::string& line) {
  say_(line);  // first: the line is out even if the abort itself hangs
  transport_.abort();
  exit_();
}

}  // namespace kiln::dist
