// backend/cpu/rows.cc — row gathers and scatters (embeddings), attention head layout changes.
#include <algorithm>
#include <cstring>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::ops {

void gather_rows(const float* table, int64_t num, int64_t dim, const int32_t* ids, int64_t n,
                 float* out) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= num)
      throw Error("embedding: id {} at position {} is outside [0, {})", ids[i], i, num);
#pragma omp parallel for schedule(static) if (n * dim > 8192)
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * dim, table + int64_t(ids[i]) * dim, size_t(dim) * sizeof(float));
}

// Each task owns a block of columns and adds rows in the order of i, so repeated ids sum in a
// fixed order whatever the thread count.
void scatter_add_rows(const float* dy, const int32_t* ids, int64_t n, int64_t dim,
                      float* dtable) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (dim + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n * dim > 8192)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kBlock, w = std::min(kBlock, dim - c0);
    for (int64_t i = 0; i < n; ++i) {
      const float* src = dy + i * dim + c0;
      float* dst = dtable + int64_t(ids[i]) * dim + c0;
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) dst[c] += src[c];
    }
  }
}

void split_heads(const float* x, int64_t B, int64_t S, int64_t heads, int64_t d, float* y) {
#pragma omp parallel for collapse(3) schedule(static) if (B * S * heads * d > 8192)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < S; ++s)
        std::memcpy(y + ((b * heads + h) * S + s) * d, x + ((b * S + s) * heads + h) * d,
                    size_t(d) * sizeof(float));
}

void merge_heads(const float* x, int64_t B, int64_t S, int64_t heads, int64_t d, float* y) {
#pragma omp parallel for collapse(3) schedule(static) if (B * S * heads * d > 8192)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < heads; ++h)
        std::memcpy(y + ((b * S + s) * heads + h) * d, x + ((b * heads + h) * S + s) * d,
                    size_t(d) * sizeof(float));
}

}  // namespace kiln::ops
