// backend/cuda/matmul_plan.h — how the CUDA matmul runs a MatView's two batch levels as
// cuBLASLt calls (one strided batch, a strided batch per outer batch, or one pointer-array batch),
// the device table of matrix addresses the last reads, and the key its cached plans are found by,
// as plain functions tested on the CPU.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/core/hd.h"

namespace kiln::ops::cuda {

// How a product's matrices are handed to cuBLASLt:
//   merged:  one call, one strided batch (every view's batch[0] stride spans its batch[1]);
//   by_outer: a strided batch of batch[1] per call, the call repeated for each of batch[0];
//   by_table: one call, pointer-array batching: each matrix's address read from a device table
//             (heads views, batch {B, heads}, whose B stride is not heads times the head's).
enum class Batching { merged, by_outer, by_table };

// One level of batching that a cuBLASLt call runs: `count` matrices `stride` elements apart, or
// with `table`, at the addresses of a pointer table.
struct Batch {
  int64_t count = 1, stride = 0;
  bool table = false;
};

// Whether the view's two batch levels are one strided level (batch[0]'s stride spans batch[1]).
inline bool mergeable(const MatView& v) {
  return v.batch[0] == 1 || v.batch[1] == 1 || v.batch_stride[0] == v.batch[1] * v.batch_stride[1];
}

// The batches one call runs.
inline Batch inner_batch(const MatView& v, Batching mode) {
  if (mode == Batching::by_table) return {v.batch[0] * v.batch[1], 0, true};
  if (mode == Batching::by_outer) return {v.batch[1], v.batch_stride[1]};
  if (v.batch[1] == 1) return {v.batch[0], v.batch_stride[0]};
  return {v.batch[0] * v.batch[1], v.batch_stride[1]};
}

// The calls a product makes in `mode` (c's batch[0] per call when by_outer).
inline int64_t calls_for(const MatView& c, Batching mode) { return mode == Batching::by_outer ? c.batch[0] : 1; }

// The pointer tables of a by_table product: entry b0 * inner + b1 of view v's table (v: cuBLASLt's
// A, B, C) is the address of its matrix (b0, b1). One item per entry; the three tables follow one
// another in `table` (3 * count entries).
struct PointerTableBody {
  uintptr_t first[3] = {};              // each view's matrix (0, 0)
  int64_t stride0[3] = {}, stride1[3] = {};  // bytes between matrices of batch level 0, of level 1
  int64_t inner = 1, count = 1;         // batch[1]; batch[0] * batch[1]
  uintptr_t* table = nullptr;

  KILN_HD void operator()(int64_t i) const {
    const int64_t v = i / count, j = i - v * count;
    const int64_t b0 = j / inner, b1 = j - b0 * inner;
    table[i] = first[v] + uintptr_t(b0 * stride0[v] + b1 * stride1[v]);
  }
};

// The table body of the three views (cuBLASLt's A, B, C) whose matrices (0, 0) are at `first`.
inline PointerTableBody pointer_tables(const std::array<const MatView*, 3>& views,
                                       const std::array<const void*, 3>& first, uintptr_t* table) {
  PointerTableBody body;
  for (size_t v = 0; v < 3; ++v) {
    const int64_t size = int64_t(dtype_size(views[v]->t.dtype));
    body.first[v] = reinterpret_cast<uintptr_t>(first[v]);
    body.stride0[v] = views[v]->batch_stride[0] * size;
    body.stride1[v] = views[v]->batch_stride[1] * size;
  }
  body.inner = views[2]->batch[1];
  body.count = views[2]->batch[0] * views[2]->batch[1];
  body.table = table;
  return body;
}

// Whether the view covers its whole tensor densely, so that a kernel may run over the tensor.
inline bool covers_tensor(const MatView& v) {
  const int64_t matrix = v.rows * v.cols;
  return v.offset == 0 && v.ld == v.cols && !v.trans &&
         (v.batch[1] == 1 || v.batch_stride[1] == matrix) &&
         (v.batch[0] == 1 || v.batch_stride[0] == v.batch[1] * matrix) &&
         v.batch[0] * v.batch[1] * matrix == v.t.numel();
}

// The cuBLASLt epilogue a product's options ask for (matmul.cc maps it to cuBLASLt's enum).
// kiln's a goes in as cuBLASLt's B, so the bias gradient, a reduction of op(a) over k, is
// cuBLASLt's BGRADB (its sums have D's column count: kiln's M).
enum class Epilogue { none, bias, relu, relu_bias, gelu, gelu_bias, bias_grad_b };

inline Epilogue epilogue_for(const MatmulOpts& o) {
  if (o.bias_grad) return Epilogue::bias_grad_b;
  const bool bias = o.bias != nullptr;
  switch (o.act) {
    case Activation::relu: return bias ? Epilogue::relu_bias : Epilogue::relu;
    case Activation::gelu_tanh: return bias ? Epilogue::gelu_bias : Epilogue::gelu;
    default: return bias ? Epilogue::bias : Epilogue::none;  // erf-GELU: a kernel after the product
  }
}

// The batching a product asks for: merged where every view merges; else one pointer-array call
// for a plain product (no epilogue, beta 0: an algorithm search may time its candidates on c
// itself); else a call per outer batch. A cuBLASLt that refuses pointer arrays gets by_outer.
inline Batching preferred_batching(const MatView& a, const MatView& b, const MatView& c, const MatmulOpts& o) {
  if (mergeable(a) && mergeable(b) && mergeable(c)) return Batching::merged;
  const bool plain = epilogue_for(o) == Epilogue::none && o.act == Activation::none && o.beta == 0.0f;
  return plain ? Batching::by_table : Batching::by_outer;
}

// The largest power of two (at most 256) dividing the address: cuBLASLt picks only algorithms
// that need no more alignment than the pointers have.
inline uint32_t alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return address == 0 ? 256u : uint32_t(std::min<uintptr_t>(256, uintptr_t(1) << std::countr_zero(address)));
}

// The alignment every matrix of a view has: that of its first, and of its batch strides in bytes.
inline uint32_t all_matrices_alignment(const void* first, const MatView& v) {
  const auto bytes = [&](int64_t stride) {
    return reinterpret_cast<const void*>(uintptr_t(stride * int64_t(dtype_size(v.t.dtype))));
  };
  return std::min({alignment(first), alignment(bytes(v.batch_stride[0])), alignment(bytes(v.batch_stride[1]))});
}

// The alignment of the epilogue's vector (the bias, or the bias gradient it writes) at every
// call, batch by batch with a bias batch stride; 0 without one. cuBLASLt's heuristic reads the
// bias pointer's alignment too, so a plan holds only for vectors aligned at least as well.
inline uint32_t vector_alignment(const MatmulOpts& o) {
  const Tensor* v = o.bias_grad ? o.bias_grad : o.bias;
  if (!v) return 0;
  const uint32_t first = alignment(v->data);
  if (o.bias_batch_stride == 0) return first;
  const auto* next = static_cast<const std::byte*>(v->data) + o.bias_batch_stride * int64_t(dtype_size(v->dtype));
  return std::min(first, alignment(next));
}

// Everything a cuBLASLt plan (layouts, descriptor, algorithm) depends on, as integers: the
// device, each view's shape, layout, batches and dtype, the epilogue (with its bias's batch
// stride and whether it sums a bias gradient), beta and the alignments of the operands and the
// epilogue's vector. Pointers and alpha are not part of it: they are passed with every call.
struct PlanKey {
  static constexpr int kViewFields = 9;
  std::array<int64_t, 3 * kViewFields + 7> fields{};
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = 14695981039346656037ull;  // FNV-1a over the fields
    for (int64_t f : k.fields) h = (h ^ uint64_t(f)) * 1099511628211ull;
    return size_t(h);
  }
};

// align: the bytes a, b and c's first elements and the epilogue's vector are aligned to.
inline PlanKey plan_key(int device, const MatView& a, const MatView& b, const MatView& c, const MatmulOpts& o,
                        const std::array<uint32_t, 4>& align) {
  PlanKey k;
  size_t i = 0;
  for (const MatView* v : {&a, &b, &c})
    for (int64_t f : {v->rows, v->cols, v->ld, int64_t(v->trans), v->batch[0], v->batch[1], v->batch_stride[0],
                      v->batch_stride[1], int64_t(v->t.dtype)})
      k.fields[i++] = f;
  const int64_t bias = o.bias ? int64_t(o.bias->dtype) : -1;
  const int64_t align_bits =
      int64_t(align[0]) | int64_t(align[1]) << 16 | int64_t(align[2]) << 32 | int64_t(align[3]) << 48;
  for (int64_t f : {int64_t(device), int64_t(o.act), bias, o.bias_batch_stride, int64_t(o.bias_grad != nullptr),
                    int64_t(std::bit_cast<uint32_t>(o.beta)), align_bits})
    k.fields[i++] = f;
  return k;
}

}  // namespace kiln::ops::cuda
