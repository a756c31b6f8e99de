// The algorithm cache (backend/algo_cache.h) that the CUDA matmul and convolutions use for their
// timed search: winners survive into the next process through the file, a damaged file is
// replaced rather than fatal, the fastest candidate wins and a failing one never does, no search
// runs inside a graph capture, and the file's place and the search follow the environment.
#include "kiln/backend/algo_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace kiln::ops {
namespace {
namespace fs = std::filesystem;

using testing::ScopedEnv;

TEST(AlgoCache, WinnersSurviveIntoTheNextProcessThroughTheFile) {
  const fs::path file = testing::unique_temp_dir("algo_cache") / "nested" / "algorithms.json";
  {
    AlgoCache cache(file);
    EXPECT_FALSE(cache.find("gpu|matmul|a"));
    cache.record("gpu|matmul|a", 3);
    cache.record("gpu|conv|b", 0);
    EXPECT_EQ(cache.find("gpu|matmul|a"), 3);
  }
  const AlgoCache again(file);  // as a later run reads it
  EXPECT_EQ(again.find("gpu|matmul|a"), 3);
  EXPECT_EQ(again.find("gpu|conv|b"), 0);
  EXPECT_FALSE(again.find("gpu|matmul|other shape"));
}

TEST(AlgoCache, ADamagedFileIsReplacedNotFatal) {
  const fs::path file = testing::unique_temp_dir("algo_cache_damaged") / "algorithms.json";
  std::ofstream(file) << "{\"winners\": {\"k\": ";  // cut off mid-write
  AlgoCache cache(file);
  EXPECT_FALSE(cache.find("k"));
  cache.record("k", 1);
  EXPECT_EQ(AlgoCache(file).find("k"), 1);
}

TEST(AlgoCache, TheFastestRunningCandidateWins) {
  const double ms[] = {2.0, -1.0, 0.5, 0.7};  // candidate 1 failed to run
  EXPECT_EQ(fastest_candidate(4, [&](int i) { return ms[i]; }), 2);
  EXPECT_EQ(fastest_candidate(2, [&](int i) { return i == 0 ? -1.0 : 9.0; }), 1);
  EXPECT_EQ(fastest_candidate(3, [](int) { return -1.0; }), -1);
  EXPECT_EQ(fastest_candidate(0, [](int) { return 1.0; }), -1);
}

TEST(AlgoCache, TheFileAndTheSearchFollowTheEnvironment) {
  {
    const ScopedEnv dir("KILN_CACHE_DIR", "/tmp/kiln-cache"), xdg("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(AlgoCache::default_file(), fs::path("/tmp/kiln-cache/algorithms.json"));
  }
  {
    const ScopedEnv dir("KILN_CACHE_DIR", nullptr), xdg("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(AlgoCache::default_file(), fs::path("/tmp/xdg/kiln/algorithms.json"));
  }
  {
    const ScopedEnv dir("KILN_CACHE_DIR", nullptr), xdg("XDG_CACHE_HOME", nullptr), home("HOME", "/home/u");
    EXPECT_EQ(AlgoCache::default_file(), fs::path("/home/u/.cache/kiln/algorithms.json"));
  }
  {
    const ScopedEnv search("KILN_SEARCH", "0");
    EXPECT_FALSE(algorithm_search_enabled());
  }
  const ScopedEnv search("KILN_SEARCH", nullptr);
  EXPECT_TRUE(algorithm_search_enabled());
}

// Inside a graph capture the search (cudaMalloc, event synchronisation) must not run: the first
// candidate is taken and nothing recorded, so the first eager call searches and records; a
// recorded winner serves captures too.
TEST(AlgoCache, NoSearchRunsInsideAGraphCapture) {
  AlgoCache cache(testing::unique_temp_dir("algo_cache_capture") / "algorithms.json");
  int searches = 0;
  const auto search = [&] {
    ++searches;
    return 2;
  };
  EXPECT_EQ(choose_candidate(cache, "k", 4, /*capturing=*/true, search), 0);
  EXPECT_EQ(searches, 0);
  EXPECT_FALSE(cache.find("k"));
  EXPECT_EQ(choose_candidate(cache, "k", 4, false, search), 2);
  EXPECT_EQ(searches, 1);
  EXPECT_EQ(cache.find("k"), 2);
  EXPECT_EQ(choose_candidate(cache, "k", 4, true, search), 2);
  EXPECT_EQ(choose_candidate(cache, "k", 4, false, search), 2);
  EXPECT_EQ(searches, 1) << "a recorded winner is not searched again";
  EXPECT_EQ(choose_candidate(cache, "one", 1, false, search), 0);
  EXPECT_EQ(choose_candidate(cache, "none ran", 3, false, [] { return -1; }), -1);
  EXPECT_FALSE(cache.find("none ran"));
  const ScopedEnv off("KILN_SEARCH", "0");
  EXPECT_EQ(choose_candidate(cache, "k", 4, false, search), 0) << "KILN_SEARCH=0: the library's first";
  EXPECT_EQ(searches, 1);
}

}  // namespace
}  // namespace kiln::ops
