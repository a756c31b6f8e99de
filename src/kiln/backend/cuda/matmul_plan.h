// backend/cuda/matmul_plan.h — how the CUDA matmul splits a MatView's two batch levels into
// cuBLASLt calls (one strided batch per call), and the key its cached plans are found by, as
// plain functions tested on the CPU.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "kiln/backend/backend.h"

namespace kiln::ops::cuda {

// One level of batching that a cuBLASLt call runs: `count` matrices `stride` elements apart.
struct Batch {
  int64_t count = 1, stride = 0;
};

// Whether the view's two batch levels are one strided level (batch[0]'s stride spans batch[1]).
inline bool mergeable(const MatView& v) {
  return v.batch[0] == 1 || v.batch[1] == 1 || v.batch_stride[0] == v.batch[1] * v.batch_stride[1];
}

// The batches one call runs: both levels when `merged` (every view of the product is
// mergeable), else batch[1] per call, the call repeated for each of batch[0].
inline Batch inner_batch(const MatView& v, bool merged) {
  if (!merged) return {v.batch[1], v.batch_stride[1]};
  if (v.batch[1] == 1) return {v.batch[0], v.batch_stride[0]};
  return {v.batch[0] * v.batch[1], v.batch_stride[1]};
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

// The largest power of two (at most 256) dividing the address: cuBLASLt picks only algorithms
// that need no more alignment than the pointers have.
inline uint32_t alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return address == 0 ? 256u : uint32_t(std::min<uintptr_t>(256, uintptr_t(1) << std::countr_zero(address)));
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
