// The vectorised Philox of the CPU dropout gives the words of core/philox.h's philox4x32, in
// element order, for every lane.
// GCC 12's false warnings on inlined AVX-512 intrinsics (backend/cpu/philox_lanes.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "kiln/backend/cpu/philox_lanes.h"
#include "kiln/core/philox.h"
#include "kiln/core/philox_batch.h"

namespace kiln {
namespace {

TEST(PhiloxLanes, EveryLaneIsTheScalarBlock) {
  const uint64_t seeds[] = {0, 42, 0xfedcba9876543210ull};
  const uint64_t streams[] = {0, rng_stream(RngPurpose::dropout, 7, 123456789), ~0ull};
  const uint32_t his[] = {0, 1, 0xffffffffu};
  const uint32_t los[] = {0, 5, 0x7fffffffu, 0xffffffffu - kPhiloxLanes + 1};
  int checked = 0;
  for (uint64_t seed : seeds)
    for (uint64_t stream : streams)
      for (uint32_t hi : his)
        for (uint32_t lo : los) {
          uint32_t got[4 * kPhiloxLanes], portable[4 * kPhiloxLanes];
          ops::cpu::philox_lanes(seed, stream, hi, lo, got);
          philox_lanes_portable(seed, stream, hi, lo, portable);
          for (int l = 0; l < kPhiloxLanes; ++l) {
            const auto want = philox4x32(seed, stream, (uint64_t(hi) << 32) | (lo + uint32_t(l)));
            for (int w = 0; w < 4; ++w) {
              ASSERT_EQ(got[4 * l + w], want[size_t(w)]) << seed << " " << lo << " " << l;
              ASSERT_EQ(portable[4 * l + w], want[size_t(w)]) << seed << " " << lo << " " << l;
            }
            ++checked;
          }
        }
  EXPECT_EQ(checked, 3 * 3 * 3 * 4 * kPhiloxLanes);
}

// Both keep-mask paths against the scalar rule, at probabilities that hit the threshold's
// rounding: a word whose top 24 bits equal p * 2^24 rounded up is kept, one below is dropped.
TEST(PhiloxLanes, KeepMasksAreTheScalarDropoutRule) {
  const float probs[] = {0.0f, 0.1f, 0.5f, 0.9f, 0.999f};
  int64_t dropped = 0, total = 0;
  for (float p : probs)
    for (uint32_t lo = 0; lo < 64 * kPhiloxLanes; lo += kPhiloxLanes) {
      float got[4 * kPhiloxLanes], portable[4 * kPhiloxLanes];
      ops::cpu::dropout_keep_lanes(42, 7, 3, lo, p, got);
      ops::cpu::dropout_keep_lanes_portable(42, 7, 3, lo, p, portable);
      for (int t = 0; t < 4 * kPhiloxLanes; ++t) {
        const uint32_t word = philox4x32(42, 7, (uint64_t(3) << 32) | (lo + uint32_t(t / 4)))[size_t(t % 4)];
        const float want = u32_to_unit_float(word) < p ? 0.0f : 1.0f;
        ASSERT_EQ(got[t], want) << "p " << p << " lo " << lo << " t " << t;
        ASSERT_EQ(portable[t], want) << "p " << p << " lo " << lo << " t " << t;
        dropped += want == 0.0f;
        ++total;
      }
    }
  // The rule itself is not degenerate: about (0 + 0.1 + 0.5 + 0.9 + 0.999) / 5 of all dropped.
  EXPECT_NEAR(double(dropped) / double(total), 2.499 / 5, 0.02);
}

// The batched uniforms equal the scalar ones wherever a run starts and ends, across a block
// whose low counter word wraps (the lanes step back to one block at a time there).
TEST(PhiloxLanes, UniformsMatchTheScalarStream) {
  const RngStream rng{42, rng_stream(RngPurpose::fake_data, 0, 3)};
  const uint64_t wrap = (uint64_t(1) << 34) - 4 * kPhiloxLanes;  // element of block 2^32 - 16
  const std::pair<uint64_t, uint64_t> runs[] = {{0, 1}, {1, 3}, {2, 64}, {3, 1000}, {150529, 150528},
                                                {wrap - 7, 200}, {wrap + 61, 9}};
  for (const auto& [first, n] : runs) {
    std::vector<float> got(n, -1.0f);
    uniforms(rng, first, n, got.data());
    for (uint64_t j = 0; j < n; ++j) ASSERT_EQ(got[j], rng.uniform(first + j)) << "first " << first << " j " << j;
  }
}

}  // namespace
}  // namespace kiln
