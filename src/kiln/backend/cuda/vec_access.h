// backend/cuda/vec_access.h — 16-byte vector access for the bandwidth-bound bodies: an item
// covers W neighbouring elements (a span) and reads and writes them as whole 16-byte packs, one
// aligned ld/st.global.v4 each on the device (a plain copy on the host). A warp's access is then
// 512 bytes, four whole 128-byte lines; one bf16 per thread is 64, so the scalar bodies needed 8x
// the instructions and requests in flight for the same traffic.
// Values are converted with hd_types.h's load / store, so a span's results are bitwise those of
// the scalar bodies. The last span of a tensor may be short, and a launch whose pointers are not
// all 16-byte aligned (a view at an odd offset) reads every span element by element: the host
// checks alignment once per launch (packs_aligned) and the body branches on that flag, the same
// for every thread, rather than doubling its instantiations.
#pragma once
#include <cstdint>
#include <cstring>

#include "kiln/backend/cuda/hd_types.h"

namespace kiln::ops::cuda {

inline constexpr int kPackBytes = 16;

// Elements of T in one 16-byte pack: 4 f32, 8 bf16 or f16.
template <typename T>
inline constexpr int kPackLanes = kPackBytes / int(sizeof(T));

// The span width of a body over operands of types Ts: one pack of the narrowest, so that every
// operand's part of a span is whole packs (an f32 operand of a bf16 span: two).
template <typename... Ts>
constexpr int span_width() {
  int least = kPackBytes;
  ((least = int(sizeof(Ts)) < least ? int(sizeof(Ts)) : least), ...);
  return kPackBytes / least;
}
template <typename... Ts>
inline constexpr int kSpanWidth = span_width<Ts...>();

struct alignas(kPackBytes) Pack {
  uint32_t words[kPackBytes / 4];
};

// One 16-byte read or write at p, which is 16-byte aligned.
KILN_HD inline Pack read_pack(const void* p) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const Pack*>(p);
#else
  Pack pack;
  std::memcpy(&pack, p, kPackBytes);
  return pack;
#endif
}
KILN_HD inline void write_pack(void* p, const Pack& pack) {
#if defined(__CUDA_ARCH__)
  *static_cast<Pack*>(p) = pack;
#else
  std::memcpy(p, &pack, kPackBytes);
#endif
}

// The elements [first, first + count) of a tensor of n elements that item k of a launch over
// spans of W covers; whole: all W of them, read as packs.
struct Span {
  int64_t first;
  int count;
  bool whole;
};
KILN_HD inline Span span_of(int64_t k, int W, int64_t n, bool aligned) {
  const int64_t first = k * W, left = n - first;
  const int count = left < W ? int(left) : W;
  return {first, count, aligned && count == W};
}

// a / b and a % b for a >= 0, b > 0: a 32-bit division where both fit (a 64-bit one is a
// software routine of ~70 instructions on the GPU), taken once per span, not per element.
struct QuotRem {
  int64_t q, r;
};
KILN_HD inline QuotRem divide(int64_t a, int64_t b) {
  if (((a | b) >> 32) == 0) {
    const uint32_t q = uint32_t(a) / uint32_t(b);
    return {int64_t(q), a - int64_t(q) * b};
  }
  return {a / b, a % b};
}

// a * b rounded to f32 and never fused into an FMA with the sum it feeds. A FloatPtr body's
// operand loads branch on the dtype, which left its products and sums in different basic blocks
// where the compiler did not fuse them (LayerNorm's apply passes: mul, add in the old PTX); a
// span body has no such branches, and writes those products with mul_rn to keep their results.
KILN_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  const volatile float product = a * b;
  return product;
#endif
}

// Items of a launch over spans of W covering n elements.
inline int64_t span_count(int64_t n, int W) { return (n + W - 1) / W; }

// Whether every pointer is 16-byte aligned, so that spans (whose offsets are multiples of
// 16 bytes in each operand) can be read as packs.
template <typename... Ps>
bool packs_aligned(const Ps*... ps) {
  return ((reinterpret_cast<uintptr_t>(ps) % kPackBytes == 0) && ...);
}

// v[0 .. W) = p[0 .. W) as f32, p 16-byte aligned.
template <int W, typename T>
KILN_HD void load_packs(const T* p, float (&v)[W]) {
  constexpr int lanes = kPackLanes<T>;
  static_assert(W % lanes == 0, "a span is whole packs of each operand");
  for (int q = 0; q < W / lanes; ++q) {
    const Pack pack = read_pack(p + q * lanes);
    T elems[lanes];
    std::memcpy(elems, &pack, kPackBytes);
    for (int j = 0; j < lanes; ++j) v[q * lanes + j] = load(elems[j]);
  }
}

// p[0 .. W) = v rounded to T, p 16-byte aligned.
template <int W, typename T>
KILN_HD void store_packs(T* p, const float (&v)[W]) {
  constexpr int lanes = kPackLanes<T>;
  static_assert(W % lanes == 0, "a span is whole packs of each operand");
  for (int q = 0; q < W / lanes; ++q) {
    T elems[lanes];
    for (int j = 0; j < lanes; ++j) elems[j] = store<T>(v[q * lanes + j]);
    Pack pack;
    std::memcpy(&pack, elems, kPackBytes);
    write_pack(p + q * lanes, pack);
  }
}

// v = the span's elements of p as f32 (0 past a short span's end).
template <int W, typename T>
KILN_HD void load_span(const T* p, const Span& s, float (&v)[W]) {
  if (s.whole) return load_packs<W>(p + s.first, v);
  for (int j = 0; j < W; ++j) v[j] = j < s.count ? load(p[s.first + j]) : 0.0f;
}

// The span's elements of p = v rounded to T.
template <int W, typename T>
KILN_HD void store_span(T* p, const Span& s, const float (&v)[W]) {
  if (s.whole) return store_packs<W>(p + s.first, v);
  for (int j = 0; j < s.count; ++j) p[s.first + j] = store<T>(v[j]);
}

}  // namespace kiln::ops::cuda
