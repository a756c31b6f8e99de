// dist/watchdog.h — `--dist-timeout`: no rank waits forever for another. Each collective is
// wrapped in a Wait; a background thread checks the open one, and when it has lasted longer
// than the limit calls `on_expiry` once (the MPI communicator prints which collective waited
// and ends the process; the launcher then ends the other ranks, and any rank waiting on the
// dead one expires in turn).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace kiln::dist {

class Watchdog {
 public:
  // on_expiry(op, limit_seconds), called on the watchdog's thread.
  using Expiry = std::function<void(const char* op, double limit_seconds)>;
  explicit Watchdog(Expiry on_expiry);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Seconds one collective may wait; 0 turns the watchdog off (the default).
  void set_limit(double seconds);

  class Wait {
   public:
    ~Wait();
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;

   private:
    friend class Watchdog;
    explicit Wait(Watchdog& w) : watchdog_(w) {}
    Watchdog& watchdog_;
  };
  // Marks `op` (a string literal) as waiting until the returned Wait ends.
  [[nodiscard]] Wait wait(const char* op);

 private:
  using Clock = std::chrono::steady_clock;
  void watch();

  Expiry on_expiry_;
  std::mutex mutex_;
  std::condition_variable wake_;
  double limit_seconds_ = 0;
  const char* op_ = nullptr;  // the open wait, if any
  Clock::time_point since_;
  bool expired_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kiln::dist
