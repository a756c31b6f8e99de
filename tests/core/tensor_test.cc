#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "kiln/nn/params.h"
#include "kiln/core/philox.h"
#include "kiln/core/tensor.h"

namespace kiln {

TEST(Tensor, ZerosIsAlignedAndZeroed) {
  Tensor t = Tensor::zeros({3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t.ptr<float>()[i], 0.0f);
  EXPECT_THROW(t.reshape({4, 4}), Error);
  EXPECT_EQ(t.reshape({5, 3}).dim(-1), 3);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << h;
    EXPECT_EQ(f16_to_f32_portable(uint16_t(h)), f) << h;
  }
  EXPECT_EQ(f16_to_f32(f32_to_f16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(70000.0f))));
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + 1.0f / 4096)), 1.0f);  // tie to even
}

// The portable conversion rounds exactly as the inline one: every f32 with the low 13 mantissa
// bits at the rounding boundaries, over the whole exponent range.
TEST(DType, F16PortableRoundingMatchesTheInlineConversion) {
  for (uint32_t hi = 0; hi < (1u << 19); ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu}) {
      const uint32_t bits = (hi << 13) | lo;
      float f;
      std::memcpy(&f, &bits, 4);
      if (std::isnan(f)) continue;
      ASSERT_EQ(f32_to_f16_portable(f), f32_to_f16(f)) << std::hex << bits;
    }
  }
}

// Every f32 but NaN converts as F16C's instruction does: the inline conversion is branch-free
// integer and f32 arithmetic, checked here against the hardware's rounding, subnormals included.
TEST(DType, F16ConversionMatchesTheInstructionOnEveryF32) {
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(-NAN))));
#if defined(__F16C__)
  int64_t mismatches = 0;
#pragma omp parallel for reduction(+ : mismatches)
  for (int64_t hi = 0; hi < 65536; ++hi) {
    for (uint32_t lo = 0; lo < 65536; ++lo) {
      const float f = f32_from_bits(uint32_t(hi) << 16 | lo);
      if (!std::isnan(f) && f32_to_f16(f) != _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)) ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0);
#else
  GTEST_SKIP() << "built without F16C: the portable reference alone checks the conversion";
#endif
}

TEST(Philox, MatchesPublishedKnownAnswer) {
  // Random123 kat_vectors: philox4x32_10, counter and key all ones (0xffffffff).
  uint64_t ones = ~0ull;
  auto r = philox4x32(ones, ones, ones);
  EXPECT_EQ(r[0], 0x408f276du);
  EXPECT_EQ(r[1], 0x41c83b0eu);
  EXPECT_EQ(r[2], 0xa20bc7c6u);
  EXPECT_EQ(r[3], 0x6d5451fdu);
}

TEST(Philox, UniformHasExpectedMeanAndStreamsDiffer) {
  RngStream a{42, rng_stream(RngPurpose::dropout, 1, 7)};
  RngStream b{42, rng_stream(RngPurpose::dropout, 2, 7)};
  double sum = 0;
  int same = 0;
  for (int i = 0; i < 100000; ++i) {
    sum += a.uniform(i);
    same += a.uniform(i) == b.uniform(i);
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  EXPECT_LT(same, 50);
}

TEST(ParamStore, SlicesAreAlignedAndNamed) {
  ParamStore store;
  Param a = store.add("a.weight", {3, 5}, true);
  Param b = store.add("a.bias", {5}, false);
  EXPECT_THROW(store.add("a.bias", {5}, false), Error);
  store.allocate();
  EXPECT_EQ(a.spec().offset, 0);
  EXPECT_EQ(b.spec().offset, 16);
  EXPECT_EQ(b.w() - a.w(), 16);
  EXPECT_FALSE(store.find("a.bias")->decay);
  EXPECT_THROW(store.add("c", {1}, true), Error);
}

}  // namespace kiln
