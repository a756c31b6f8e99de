// kiln's PythonRandom against CPython's random.Random: tests/data/python_random_draws.py makes
// draws with /usr/bin/python3 and the test replays them in the same order.
#include "kiln/data/bert/python_random.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "tests/testing/run_command.h"

namespace kiln::data {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

void replay(uint64_t seed) {
  const std::string script = std::string(KILN_SOURCE_DIR) + "/tests/data/python_random_draws.py";
  const auto [rc, out] = kiln::testing::run_command(std::string(kPython) + " " + script + " " + std::to_string(seed));
  ASSERT_EQ(rc, 0) << out;
  PythonRandom r(seed);
  size_t i = 0;
  for (const auto& op : nlohmann::json::parse(out)) {
    const std::string name = op[0];
    SCOPED_TRACE("seed " + std::to_string(seed) + ", draw " + std::to_string(i++) + ": " + op.dump().substr(0, 80));
    if (name == "random") {
      ASSERT_EQ(r.random(), op[1].get<double>());
    } else if (name == "getrandbits") {
      ASSERT_EQ(r.getrandbits(op[1].get<int>()), op[2].get<uint64_t>());
    } else if (name == "randint") {
      ASSERT_EQ(r.randint(op[1].get<int64_t>(), op[2].get<int64_t>()), op[3].get<int64_t>());
    } else {
      std::vector<int64_t> v(op[1].get<size_t>());
      std::iota(v.begin(), v.end(), 0);
      r.shuffle(v);
      ASSERT_EQ(v, op[2].get<std::vector<int64_t>>());
    }
  }
  EXPECT_GT(i, 100u);
}

TEST(PythonRandom, MatchesCPythonRandomForSeveralSeeds) {
  if (!std::filesystem::exists(kPython)) GTEST_SKIP() << kPython << " not installed";
  for (const uint64_t seed : {uint64_t(0), uint64_t(1), uint64_t(12345), uint64_t(0xFFFFFFFF), uint64_t(1) << 32,
                              (uint64_t(1) << 40) + 12345, ~uint64_t(0)})
    replay(seed);
}

}  // namespace
}  // namespace kiln::data
