// dist::Watchdog: a wait that outlasts the limit is reported once, naming the collective; shorter
// waits, and any wait with the watchdog off, are not.
#include "kiln/dist/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

namespace kiln::dist {
namespace {

using namespace std::chrono_literals;

TEST(Watchdog, AWaitLongerThanTheLimitIsReportedOnceWithItsName) {
  std::promise<std::string> reported;
  int reports = 0;
  Watchdog w([&](const char* op, double limit) {
    if (reports++ == 0) reported.set_value(std::string(op) + " " + std::to_string(limit));
  });
  w.set_limit(0.05);
  const Watchdog::Wait wait = w.wait("all_reduce_sum");
  std::future<std::string> report = reported.get_future();
  ASSERT_EQ(report.wait_for(60s), std::future_status::ready) << "no report while the wait lasted a minute";
  EXPECT_EQ(report.get(), "all_reduce_sum 0.050000");
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(reports, 1);
}

TEST(Watchdog, WaitsWithinTheLimitOrWithTheWatchdogOffAreNotReported) {
  int reports = 0;
  {
    Watchdog w([&](const char*, double) { ++reports; });
    w.set_limit(600);
    for (int i = 0; i < 3; ++i) {
      const Watchdog::Wait wait = w.wait("barrier");
      std::this_thread::sleep_for(10ms);
    }
    w.set_limit(0);
    const Watchdog::Wait wait = w.wait("broadcast");
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(reports, 0);
}

}  // namespace
}  // namespace kiln::dist
