// dist::CollectiveWatch, NCCL's --dist-timeout, driven on the CPU with a fake transport and
// fake stream markers at chosen instants: a collective pending past the limit ends the run
// once (the MPI watchdog's line, one abort, one exit), NCCL's asynchronous error ends it at once
// in NCCL's words, a completed collective never does, and a save's longer limit covers what is
// pending during it.
#include "kiln/dist/collective_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace kiln::dist {
namespace {

using namespace std::chrono_literals;
using Clock = CollectiveWatch::Clock;

struct FakeMarker final : CollectiveWatch::Marker {
  explicit FakeMarker(std::shared_ptr<std::atomic<bool>> passed) : passed(std::move(passed)) {}
  bool done() override { return *passed; }
  std::shared_ptr<std::atomic<bool>> passed;
};

struct FakeTransport final : CollectiveWatch::Transport {
  std::string async_error() override {
    std::lock_guard lock(mutex);
    return error;
  }
  void abort() override { ++aborts; }
  void enter_thread() override { ++threads; }
  std::mutex mutex;
  std::string error;
  std::atomic<int> aborts = 0, threads = 0;
};

// A watch over a fake transport that records what it says and how often it exits.
struct Watched {
  Watched()
      : watch(
            1, transport, [this](const std::string& line) { said.push_back(line); }, [this] { ++exits; }) {}
  // A collective queued at `at`, with the flag that marks it done.
  std::shared_ptr<std::atomic<bool>> queue(const char* op, Clock::time_point at) {
    auto passed = std::make_shared<std::atomic<bool>>(false);
    watch.queued(op, std::make_unique<FakeMarker>(passed), at);
    return passed;
  }
  FakeTransport transport;
  std::vector<std::string> said;
  int exits = 0;
  CollectiveWatch watch;
};

const Clock::time_point t0 = Clock::now();

TEST(CollectiveWatch, ACollectivePendingPastTheLimitAbortsOnceWithTheMpiWatchdogsLine) {
  Watched w;
  w.watch.set_limit(5);
  w.queue("all_reduce_sum", t0);
  EXPECT_FALSE(w.watch.poll(t0 + 4s));
  EXPECT_EQ(w.transport.aborts, 0);
  EXPECT_TRUE(w.watch.poll(t0 + 6s));
  ASSERT_EQ(w.said.size(), 1u);
  EXPECT_EQ(w.said[0],
            "kiln: rank 1: error: all_reduce_sum waited more than 5 s for the other ranks (--dist-timeout); a rank "
            "failed or hangs; ending every rank");
  EXPECT_EQ(w.transport.aborts, 1);
  EXPECT_EQ(w.exits, 1);
  // Ended: later rounds and later collectives change nothing.
  w.queue("broadcast", t0 + 7s);
  EXPECT_FALSE(w.watch.poll(t0 + 100s));
  EXPECT_EQ(w.transport.aborts, 1);
  EXPECT_EQ(w.exits, 1);
  EXPECT_EQ(w.said.size(), 1u);
}

TEST(CollectiveWatch, TheOldestPendingCollectiveIsNamedNotOneThatCompleted) {
  Watched w;
  w.watch.set_limit(2);
  const auto first = w.queue("all_reduce_sum", t0);
  w.queue("all_gather", t0 + 1s);
  *first = true;
  EXPECT_FALSE(w.watch.poll(t0 + 2500ms));  // the first is done; the second has waited 1.5 s
  EXPECT_EQ(w.watch.pending(), 1u);
  EXPECT_TRUE(w.watch.poll(t0 + 3500ms));
  ASSERT_EQ(w.said.size(), 1u);
  EXPECT_NE(w.said[0].find("error: all_gather waited more than 2 s"), std::string::npos) << w.said[0];
}

TEST(CollectiveWatch, AnAsynchronousErrorEndsTheRunAtOnceInNcclsWords) {
  Watched w;
  w.watch.set_limit(600);
  w.queue("reduce_scatter_sum", t0);
  EXPECT_FALSE(w.watch.poll(t0 + 1s));
  w.transport.error = "remote process exited or there was a network error";
  EXPECT_TRUE(w.watch.poll(t0 + 2s));
  ASSERT_EQ(w.said.size(), 1u);
  EXPECT_EQ(w.said[0],
            "kiln: rank 1: error: NCCL: reduce_scatter_sum failed: remote process exited or there was a network "
            "error (asynchronous error); ending every rank");
  EXPECT_EQ(w.transport.aborts, 1);
  EXPECT_EQ(w.exits, 1);
  EXPECT_FALSE(w.watch.poll(t0 + 3s));
  EXPECT_EQ(w.transport.aborts, 1);
}

TEST(CollectiveWatch, AnAsynchronousErrorIsReportedWithTheTimeoutOffAndNothingPending) {
  Watched w;
  w.watch.set_limit(0);
  w.transport.error = "unhandled system error";
  EXPECT_TRUE(w.watch.poll(t0));
  ASSERT_EQ(w.said.size(), 1u);
  EXPECT_EQ(w.said[0], "kiln: rank 1: error: NCCL: unhandled system error (asynchronous error); ending every rank");
  EXPECT_EQ(w.transport.aborts, 1);
}

TEST(CollectiveWatch, CompletedCollectivesNeverAbortHoweverOldAndTheOffLimitNeverExpires) {
  Watched w;
  w.watch.set_limit(1);
  for (int i = 0; i < 3; ++i) *w.queue("send", t0 + i * 1s) = true;
  EXPECT_FALSE(w.watch.poll(t0 + 1h));
  EXPECT_EQ(w.watch.pending(), 0u);
  w.watch.set_limit(0);
  w.queue("receive", t0);
  EXPECT_FALSE(w.watch.poll(t0 + 24h));
  EXPECT_EQ(w.watch.pending(), 1u);
  EXPECT_EQ(w.transport.aborts, 0);
  EXPECT_EQ(w.exits, 0);
  EXPECT_TRUE(w.said.empty());
}

// train/loop_events.cc raises the limit to --save-timeout across a save or an evaluation, then
// puts --dist-timeout back, as it does for the MPI communicator.
TEST(CollectiveWatch, ASavesLongerLimitCoversWhatIsPendingDuringItAndWhatIsQueuedUnderIt) {
  Watched w;
  w.watch.set_limit(2);
  w.queue("all_reduce_sum", t0);
  w.watch.set_limit(3600);  // a save begins
  EXPECT_FALSE(w.watch.poll(t0 + 10s));
  w.queue("broadcast", t0 + 10s);
  w.watch.set_limit(2);  // and ends
  EXPECT_EQ(w.watch.limit(), 2);
  // broadcast keeps the save's limit; all_reduce_sum is back under 2 s and has waited 20.
  EXPECT_TRUE(w.watch.poll(t0 + 20s));
  ASSERT_EQ(w.said.size(), 1u);
  EXPECT_NE(w.said[0].find("error: all_reduce_sum waited more than 2 s"), std::string::npos) << w.said[0];
}

TEST(CollectiveWatch, ItsThreadPollsUntilAHungCollectiveEndsTheRun) {
  FakeTransport transport;
  std::promise<std::string> said;
  std::atomic<int> exits = 0;
  {
    CollectiveWatch watch(
        0, transport, [&](const std::string& line) { said.set_value(line); }, [&] { ++exits; });
    watch.set_limit(0.05);
    watch.queued("all_reduce_sum", std::make_unique<FakeMarker>(std::make_shared<std::atomic<bool>>(false)));
    watch.start(1ms);
    std::future<std::string> line = said.get_future();
    ASSERT_EQ(line.wait_for(60s), std::future_status::ready) << "no end while the collective hung a minute";
    EXPECT_NE(line.get().find("all_reduce_sum waited more than 0.05 s"), std::string::npos);
  }
  EXPECT_EQ(transport.threads, 1);
  EXPECT_EQ(transport.aborts, 1);
  EXPECT_EQ(exits, 1);
}

}  // namespace
}  // namespace kiln::dist
