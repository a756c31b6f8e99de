// backend/cpu/philox_lanes.h — Philox4x32-10 for kPhiloxLanes consecutive counters at once: the
// same numbers as core/philox_batch.h's philox_lanes_portable; with AVX-512 or AVX2 the rounds
// and the transpose into element order are intrinsics (AVX-512: 2.5x faster than GCC's
// vectorisation; AVX2, the portable build's level: GCC does not vectorise the loop at all).
#pragma once
#include <algorithm>
#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kiln/core/philox_batch.h"

namespace kiln::ops::cpu {

// keep[t] = 0 where element t of the lanes' words (philox_lanes_portable's order) is dropped at
// probability p (u32_to_unit_float(word) < p), else 1.
inline void dropout_keep_lanes_portable(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo,
                                        float p, float* keep) {
  uint32_t bits[4 * kPhiloxLanes];
  philox_lanes_portable(seed, stream, hi, lo, bits);
#pragma omp simd
  for (int t = 0; t < 4 * kPhiloxLanes; ++t) keep[t] = u32_to_unit_float(bits[t]) < p ? 0.0f : 1.0f;
}

#if defined(__AVX512F__)
// GCC 12 warns of the intrinsics' own undefined operands wherever they inline (GCC bug 105593),
// so a file including this one turns off -Wuninitialized and -Wmaybe-uninitialized. The
// intrinsics stay inline: called out of line, the dropout runs at half the speed.
namespace avx512 {

// High 32 bits of each lane's 32 x 32-bit product a * m.
inline __m512i mulhi_epu32(__m512i a, __m512i m) {
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(a, m), 32);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  return _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

// The 64 words of philox_lanes_portable, as four vectors of 16 consecutive elements.
inline void philox_lanes(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, __m512i out[4]) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i m0 = _mm512_set1_epi32(int(0xD2511F53u)), m1 = _mm512_set1_epi32(int(0xCD9E8D57u));
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(int(lo)), lane), c1 = _mm512_set1_epi32(int(hi));
  __m512i c2 = _mm512_set1_epi32(int(uint32_t(stream))), c3 = _mm512_set1_epi32(int(uint32_t(stream >> 32)));
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m512i hi0 = mulhi_epu32(c0, m0), lo0 = _mm512_mullo_epi32(c0, m0);
    const __m512i hi1 = mulhi_epu32(c2, m1), lo1 = _mm512_mullo_epi32(c2, m1);
    c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32(int(k0)), 0x96);  // three-way xor
    c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32(int(k1)), 0x96);
    c1 = lo1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // (word, lane) -> element order 4 * lane + word: 4 x 4 transposes inside each 128-bit quarter,
  // then the quarters gathered.
  const __m512i a = _mm512_unpacklo_epi32(c0, c1), b = _mm512_unpackhi_epi32(c0, c1);
  const __m512i c = _mm512_unpacklo_epi32(c2, c3), d = _mm512_unpackhi_epi32(c2, c3);
  const __m512i e0 = _mm512_unpacklo_epi64(a, c), e1 = _mm512_unpackhi_epi64(a, c);
  const __m512i e2 = _mm512_unpacklo_epi64(b, d), e3 = _mm512_unpackhi_epi64(b, d);
  const __m512i low01 = _mm512_shuffle_i32x4(e0, e1, 0x44), low23 = _mm512_shuffle_i32x4(e2, e3, 0x44);
  const __m512i high01 = _mm512_shuffle_i32x4(e0, e1, 0xEE), high23 = _mm512_shuffle_i32x4(e2, e3, 0xEE);
  out[0] = _mm512_shuffle_i32x4(low01, low23, 0x88);
  out[1] = _mm512_shuffle_i32x4(low01, low23, 0xDD);
  out[2] = _mm512_shuffle_i32x4(high01, high23, 0x88);
  out[3] = _mm512_shuffle_i32x4(high01, high23, 0xDD);
}

// dropout_keep_lanes_portable's keep[0, 64).
inline void dropout_keep_lanes(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, float p, float* keep) {
  __m512i words[4];
  philox_lanes(seed, stream, hi, lo, words);
  const __m512 unit = _mm512_set1_ps(1.0f / 16777216.0f), prob = _mm512_set1_ps(p), one = _mm512_set1_ps(1.0f);
  for (int v = 0; v < 4; ++v) {  // as u32_to_unit_float: the top 24 bits, exact in f32
    const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(words[v], 8)), unit);
    _mm512_storeu_ps(keep + 16 * v, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(u, prob, _CMP_GE_OQ), one));
  }
}

}  // namespace avx512
#elif defined(__AVX2__)
namespace avx2 {

// High 32 bits of each lane's 32 x 32-bit product a * m.
inline __m256i mulhi_epu32(__m256i a, __m256i m) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, m), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// The 32 words of the 8 lanes from counter lo on, as four vectors of 8 consecutive elements.
inline void philox_eight_lanes(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, __m256i out[4]) {
  const __m256i m0 = _mm256_set1_epi32(int(0xD2511F53u)), m1 = _mm256_set1_epi32(int(0xCD9E8D57u));
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(int(lo)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 = _mm256_set1_epi32(int(hi)), c2 = _mm256_set1_epi32(int(uint32_t(stream)));
  __m256i c3 = _mm256_set1_epi32(int(uint32_t(stream >> 32)));
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i hi0 = mulhi_epu32(c0, m0), lo0 = _mm256_mullo_epi32(c0, m0);
    const __m256i hi1 = mulhi_epu32(c2, m1), lo1 = _mm256_mullo_epi32(c2, m1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(int(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(int(k1)));
    c1 = lo1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // (word, lane) -> element order 4 * lane + word: 4 x 4 transposes inside each 128-bit half
  // (lanes 0-3 low, 4-7 high), then the halves paired.
  const __m256i a = _mm256_unpacklo_epi32(c0, c1), b = _mm256_unpackhi_epi32(c0, c1);
  const __m256i c = _mm256_unpacklo_epi32(c2, c3), d = _mm256_unpackhi_epi32(c2, c3);
  const __m256i e0 = _mm256_unpacklo_epi64(a, c), e1 = _mm256_unpackhi_epi64(a, c);  // lanes 0|4, 1|5
  const __m256i e2 = _mm256_unpacklo_epi64(b, d), e3 = _mm256_unpackhi_epi64(b, d);  // lanes 2|6, 3|7
  out[0] = _mm256_permute2x128_si256(e0, e1, 0x20);
  out[1] = _mm256_permute2x128_si256(e2, e3, 0x20);
  out[2] = _mm256_permute2x128_si256(e0, e1, 0x31);
  out[3] = _mm256_permute2x128_si256(e2, e3, 0x31);
}

// The 64 words of philox_lanes_portable, as eight vectors of 8 consecutive elements.
inline void philox_lanes(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, __m256i out[8]) {
  philox_eight_lanes(seed, stream, hi, lo, out);
  philox_eight_lanes(seed, stream, hi, lo + 8u, out + 4);
}

// dropout_keep_lanes_portable's keep[0, 64).
inline void dropout_keep_lanes(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, float p, float* keep) {
  __m256i words[8];
  philox_lanes(seed, stream, hi, lo, words);
  const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f), prob = _mm256_set1_ps(p), one = _mm256_set1_ps(1.0f);
  for (int v = 0; v < 8; ++v) {  // as u32_to_unit_float: the top 24 bits, exact in f32
    const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(words[v], 8)), unit);
    _mm256_storeu_ps(keep + 8 * v, _mm256_and_ps(_mm256_cmp_ps(u, prob, _CMP_GE_OQ), one));
  }
}

}  // namespace avx2
#endif

inline void philox_lanes(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, uint32_t* out) {
#if defined(__AVX512F__)
  __m512i words[4];
  avx512::philox_lanes(seed, stream, hi, lo, words);
  for (int v = 0; v < 4; ++v) _mm512_storeu_si512(out + 16 * v, words[v]);
#elif defined(__AVX2__)
  __m256i words[8];
  avx2::philox_lanes(seed, stream, hi, lo, words);
  for (int v = 0; v < 8; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * v), words[v]);
#else
  philox_lanes_portable(seed, stream, hi, lo, out);
#endif
}

inline void dropout_keep_lanes(uint64_t seed, uint64_t stream, uint32_t hi, uint32_t lo, float p,
                               float* keep) {
#if defined(__AVX512F__)
  avx512::dropout_keep_lanes(seed, stream, hi, lo, p, keep);
#elif defined(__AVX2__)
  avx2::dropout_keep_lanes(seed, stream, hi, lo, p, keep);
#else
  dropout_keep_lanes_portable(seed, stream, hi, lo, p, keep);
#endif
}

// keep[c] for elements [first, first + count) of one sample, as dropout_keep_lanes decides
// element e from the block (sample << 32) | (e / 4): a row of a tensor the mask covers.
inline void dropout_keep_span(uint64_t seed, uint64_t stream, uint32_t sample, int64_t first, int64_t count,
                              float p, float* keep) {
  constexpr int64_t kBatch = 4 * kPhiloxLanes;
  float lanes[kBatch];
  for (int64_t base = first / 4 * 4; base < first + count; base += kBatch) {
    const int64_t t0 = std::max<int64_t>(first - base, 0), t1 = std::min<int64_t>(first + count - base, kBatch);
    if (t0 == 0 && t1 == kBatch) {
      dropout_keep_lanes(seed, stream, sample, uint32_t(base / 4), p, keep + (base - first));
      continue;
    }
    dropout_keep_lanes(seed, stream, sample, uint32_t(base / 4), p, lanes);
    for (int64_t t = t0; t < t1; ++t) keep[base + t - first] = lanes[t];
  }
}

}  // namespace kiln::ops::cpu
