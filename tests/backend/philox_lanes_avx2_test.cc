// The AVX2 Philox of a portable build's CPU dropout (this file is compiled without AVX-512, see
// CMakeLists.txt) gives philox_lanes_portable's words and dropout_keep_lanes_portable's masks.
#include <gtest/gtest.h>

#include "kiln/backend/cpu/philox_lanes.h"
#include "kiln/core/philox.h"
#include "kiln/core/philox_batch.h"

namespace kiln {
namespace {

TEST(PhiloxLanesAvx2, WordsAndMasksAreThePortableOnes) {
#if defined(__AVX2__) && !defined(__AVX512F__)
  const uint64_t seeds[] = {0, 42, 0xfedcba9876543210ull};
  const uint64_t streams[] = {0, rng_stream(RngPurpose::dropout, 7, 123456789), ~0ull};
  const uint32_t los[] = {0, 5, 0x7fffffffu, 0xffffffffu - kPhiloxLanes + 1, 0xffffffffu - 3};
  const float probs[] = {0.0f, 0.1f, 0.5f, 0.999f};
  int checked = 0;
  for (uint64_t seed : seeds)
    for (uint64_t stream : streams)
      for (uint32_t lo : los) {
        __m256i words[8];
        uint32_t got[4 * kPhiloxLanes], want[4 * kPhiloxLanes];
        ops::cpu::avx2::philox_lanes(seed, stream, 3, lo, words);
        for (int v = 0; v < 8; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(got + 8 * v), words[v]);
        philox_lanes_portable(seed, stream, 3, lo, want);
        for (int t = 0; t < 4 * kPhiloxLanes; ++t) ASSERT_EQ(got[t], want[t]) << seed << " " << lo << " " << t;
        for (float p : probs) {
          float keep[4 * kPhiloxLanes], keep_want[4 * kPhiloxLanes];
          ops::cpu::avx2::dropout_keep_lanes(seed, stream, 3, lo, p, keep);
          ops::cpu::dropout_keep_lanes_portable(seed, stream, 3, lo, p, keep_want);
          for (int t = 0; t < 4 * kPhiloxLanes; ++t) ASSERT_EQ(keep[t], keep_want[t]) << p << " " << lo << " " << t;
        }
        ++checked;
      }
  EXPECT_EQ(checked, 3 * 3 * 5);
#else
  GTEST_SKIP() << "this build's compiler does not target AVX2 here";
#endif
}

}  // namespace
}  // namespace kiln
