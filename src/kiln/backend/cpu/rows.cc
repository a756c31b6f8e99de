// backend/cpu/rows.cc — row gathers and deterministic scatter-adds (embeddings, vocab-parallel
// embedding parts, masked positions); any float storage.
#include <algorithm>
#include <cstring>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 8192;

}  // namespace

void gather_rows(Context& ctx, const Tensor& table, const Tensor& ids, Tensor& out, int64_t first) {
  const OpScope scope = expect_cpu(ctx, "gather_rows", {&table, &ids, &out});
  const int64_t n = ids.numel(), num = table.dim(0), dim = table.dim(1);
  const int32_t* id = ids.ptr<int32_t>();
  if (table.dtype == out.dtype) {
    const size_t row_bytes = size_t(dim) * dtype_size(table.dtype);
    const auto* src = static_cast<const std::byte*>(table.data);
    auto* dst = static_cast<std::byte*>(out.data);
#pragma omp parallel for schedule(static) if (n * dim > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = id[i] - first;
      if (row >= 0 && row < num)
        std::memcpy(dst + size_t(i) * row_bytes, src + size_t(row) * row_bytes, row_bytes);
      else
        std::memset(dst + size_t(i) * row_bytes, 0, row_bytes);
    }
    return;
  }
  cpu::dispatch_float(table.dtype, "gather_rows", [&]<typename S>(S) {
    cpu::dispatch_float(out.dtype, "gather_rows", [&]<typename D>(D) {
#pragma omp parallel for schedule(static) if (n * dim > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = id[i] - first;
        const bool held = row >= 0 && row < num;
        const S* s = table.ptr<S>() + (held ? row : 0) * dim;
        D* d = out.ptr<D>() + i * dim;
        for (int64_t c = 0; c < dim; ++c) d[c] = cpu::store<D>(held ? cpu::load(s[c]) : 0.0f);
      }
    });
  });
}

// Each task owns a block of columns and adds rows in the order of i, so repeated ids sum in a
// fixed order whatever the thread count.
void scatter_add_rows(Context& ctx, const Tensor& dy, const Tensor& ids, Tensor& dtable, int64_t first) {
  const OpScope scope = expect_cpu(ctx, "scatter_add_rows", {&dy, &ids, &dtable});
  const int64_t n = ids.numel(), num = dtable.dim(0), dim = dtable.dim(1);
  const int32_t* id = ids.ptr<int32_t>();
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (dim + kBlock - 1) / kBlock;
  cpu::dispatch_float(dy.dtype, "scatter_add_rows", [&]<typename S>(S) {
    cpu::dispatch_float(dtable.dtype, "scatter_add_rows", [&]<typename D>(D) {
#pragma omp parallel for schedule(static) if (n * dim > kParallelMin)
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t c0 = blk * kBlock, w = std::min(kBlock, dim - c0);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t row = id[i] - first;
          if (row < 0 || row >= num) continue;
          const S* src = dy.ptr<S>() + i * dim + c0;
          D* dst = dtable.ptr<D>() + row * dim + c0;
#pragma omp simd
          for (int64_t c = 0; c < w; ++c) dst[c] = cpu::store<D>(cpu::load(dst[c]) + cpu::load(src[c]));
        }
      }
    });
  });
}

}  // namespace kiln::ops::cpu
