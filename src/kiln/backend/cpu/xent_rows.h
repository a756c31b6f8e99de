// backend/cpu/xent_rows.h — the per-row passes of a softmax cross-entropy (losses.cc, and the
// vocab-parallel parts in vocab_xent.cc): the maximum and its index, Σ exp(z - shift) and Σ z, and
// the gradient row.
// Their results depend on an element's index in the row alone, by construction, not on where
// the row lies in memory (a data-parallel rank holds other rows before a given one than a single
// process does, and a vectorised loop over the row itself peels for alignment, running other code
// for its first elements). So exponentials go through an aligned block buffer in a loop of fixed
// length, and sums through fixed interleaved lanes.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/cpu/vec_math.h"

namespace kiln::ops::cpu {

constexpr int64_t kXentBlock = 256;  // row elements per block buffer
constexpr int kXentSumLanes = 8;     // divides kXentBlock

// e[j] = exp(e[j]) for j < n, computed over the whole block buffer (the rest set to 0 first).
inline void exp_block(float* e, int64_t n) {
  std::fill(e + n, e + kXentBlock, 0.0f);
#pragma omp simd aligned(e : 64)
  for (int64_t j = 0; j < kXentBlock; ++j) e[j] = vec::exp(e[j]);
}

// The first index v in [from, V) with row[v] == value (V if none), a block at a time.
template <typename T>
int64_t first_index_of(const T* row, int64_t from, int64_t V, float value) {
  constexpr int64_t kBlock = 64;
  for (int64_t v0 = from; v0 < V; v0 += kBlock) {
    const int64_t end = std::min(V, v0 + kBlock);
    int hit = 0;
#pragma omp simd reduction(| : hit)
    for (int64_t v = v0; v < end; ++v) hit |= int(cpu::load(row[v]) == value);
    if (hit)
      for (int64_t v = v0; v < end; ++v)
        if (cpu::load(row[v]) == value) return v;
  }
  return V;
}

struct XentRowMax {
  float max;       // the row's maximum
  int64_t argmax;  // its first index
};

// What a scalar scan from row[0] that keeps the first strictly greater element finds (NaN
// skipped, except a NaN at index 0, which stays), in vectorised passes.
template <typename T>
XentRowMax xent_row_max(const T* row, int64_t V) {
  XentRowMax r{cpu::load(row[0]), 0};
  const float mx = row_max(row, V);
  if (mx > r.max) r.max = mx, r.argmax = first_index_of(row, 1, V, mx);
  return r;
}

struct XentRowSums {
  double exp_sum;  // Σ exp(z - shift)
  double sum;      // Σ z
};

// The sums in double, kXentSumLanes interleaved lanes added in lane order.
template <typename T>
XentRowSums xent_row_sums(const T* row, int64_t V, float shift) {
  alignas(64) float e[kXentBlock], z[kXentBlock];
  double exp_lanes[kXentSumLanes] = {}, z_lanes[kXentSumLanes] = {};
  for (int64_t v0 = 0; v0 < V; v0 += kXentBlock) {
    const int64_t n = std::min(kXentBlock, V - v0);
    const int64_t padded = (n + kXentSumLanes - 1) / kXentSumLanes * kXentSumLanes;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      z[j] = cpu::load(row[v0 + j]);
      e[j] = z[j] - shift;
    }
    exp_block(e, n);
    std::fill(e + n, e + padded, 0.0f);
    std::fill(z + n, z + padded, 0.0f);
    for (int64_t j = 0; j < padded; j += kXentSumLanes)
      for (int l = 0; l < kXentSumLanes; ++l) {
        exp_lanes[l] += double(e[j + l]);
        z_lanes[l] += double(z[j + l]);
      }
  }
  XentRowSums s{0.0, 0.0};
  for (int l = 0; l < kXentSumLanes; ++l) s.exp_sum += exp_lanes[l], s.sum += z_lanes[l];
  return s;
}

// drow_v = k (exp(z_v - lse) - smooth), less k hit at column `label` (none outside [0, V)).
template <typename T, typename D>
void xent_grad_row(const T* row, int64_t V, float lse, float k, float smooth, int64_t label, float hit,
                   D* drow) {
  alignas(64) float e[kXentBlock];
  const float k_hit = k * hit;  // one product: no contraction that could differ between code paths
  for (int64_t v0 = 0; v0 < V; v0 += kXentBlock) {
    const int64_t n = std::min(kXentBlock, V - v0), hit_at = label - v0;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) e[j] = cpu::load(row[v0 + j]) - lse;
    exp_block(e, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      float d = k * (e[j] - smooth);
      if (j == hit_at) d -= k_hit;
      drow[v0 + j] = cpu::store<D>(d);
    }
  }
}

}  // namespace kiln::ops::cpu
