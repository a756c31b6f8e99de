// The vectorised Philox of the CPU dropout gives the words of core/philox.h's philox4x32, in
// element order, for every lane.
#include <gtest/gtest.h>

#include "kiln/backend/cpu/philox_lanes.h"
#include "kiln/core/philox.h"

namespace kiln {
namespace {

TEST(PhiloxLanes, EveryLaneIsTheScalarBlock) {
  using ops::cpu::kPhiloxLanes;
  const uint64_t seeds[] = {0, 42, 0xfedcba9876543210ull};
  const uint64_t streams[] = {0, rng_stream(RngPurpose::dropout, 7, 123456789), ~0ull};
  const uint32_t his[] = {0, 1, 0xffffffffu};
  const uint32_t los[] = {0, 5, 0x7fffffffu, 0xffffffffu - kPhiloxLanes + 1};
  int checked = 0;
  for (uint64_t seed : seeds)
    for (uint64_t stream : streams)
      for (uint32_t hi : his)
        for (uint32_t lo : los) {
          uint32_t got[4 * kPhiloxLanes];
          ops::cpu::philox_lanes(seed, stream, hi, lo, got);
          for (int l = 0; l < kPhiloxLanes; ++l) {
            const auto want = philox4x32(seed, stream, (uint64_t(hi) << 32) | (lo + uint32_t(l)));
            for (int w = 0; w < 4; ++w) ASSERT_EQ(got[4 * l + w], want[size_t(w)]) << seed << " " << lo << " " << l;
            ++checked;
          }
        }
  EXPECT_EQ(checked, 3 * 3 * 3 * 4 * kPhiloxLanes);
}

}  // namespace
}  // namespace kiln
