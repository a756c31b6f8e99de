// backend/flash_args.h — a fused attention op's arguments (checked by backend/attention_check.cc) as
// the block algorithms of backend/cuda/attention_forward.h and attention_backward.h take them, for
// either backend.
#pragma once
#include <type_traits>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/attention_backward.h"
#include "kiln/backend/cuda/attention_forward.h"
#include "kiln/backend/matmul_check.h"

namespace kiln::ops {

template <typename T>
cuda::FlashHeads<T> flash_heads(const MatView& v) {
  T* p = static_cast<T*>(element(v));
  const int64_t W = cuda::kPackLanes<std::remove_const_t<T>>;
  const bool packs = cuda::packs_aligned(p) && v.cols % W == 0 && v.ld % W == 0 && v.batch_stride[0] % W == 0 &&
                     v.batch_stride[1] % W == 0;
  return {p, v.ld, v.batch_stride[0], v.batch_stride[1], packs};
}

inline cuda::FlashShape flash_shape(const MatView& q, const Tensor& mask, float scale) {
  return {q.batch[0], q.batch[1], q.rows, q.cols, scale, mask.ptr<int32_t>()};
}

// The dropout with its keep bits (written by the forward, read by the backward).
inline cuda::FlashDropout flash_dropout(const DropoutMask& d, const Tensor& keep_bits) {
  if (d.p == 0.0f) return {};
  return {d.rng, d.sample_offset.ptr<int64_t>(), d.element_offset, d.p, 1.0f / (1.0f - d.p),
          const_cast<uint32_t*>(keep_bits.ptr<uint32_t>())};
}

template <typename T>
cuda::FlashForwardArgs<T> flash_forward_args(const MatView& q, const MatView& k, const MatView& v, const Tensor& mask,
                                             const DropoutMask& drop, float scale, const MatView& context,
                                             Tensor& row_lse, Tensor& keep_bits) {
  return {flash_shape(q, mask, scale), flash_heads<const T>(q), flash_heads<const T>(k), flash_heads<const T>(v),
          flash_heads<T>(context), row_lse.ptr<float>(), flash_dropout(drop, keep_bits)};
}

template <typename T>
cuda::FlashBackwardArgs<T> flash_backward_args(const MatView& q, const MatView& k, const MatView& v,
                                               const MatView& context, const MatView& dcontext, const Tensor& mask,
                                               const DropoutMask& drop, float scale, const Tensor& row_lse,
                                               const Tensor& keep_bits, const MatView& dq, const MatView& dk,
                                               const MatView& dv, Tensor& row_dots) {
  return {flash_shape(q, mask, scale), flash_heads<const T>(q), flash_heads<const T>(k), flash_heads<const T>(v),
          flash_heads<const T>(context), flash_heads<const T>(dcontext), flash_heads<T>(dq), flash_heads<T>(dk),
          flash_heads<T>(dv), row_lse.ptr<float>(), flash_dropout(drop, keep_bits), row_dots.ptr<float>()};
}

}  // namespace kiln::ops
