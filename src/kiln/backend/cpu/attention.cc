// backend/cpu/attention.cc — fused attention on the CPU: the CUDA kernels' block algorithms
// (backend/cuda/attention_forward.h, attention_backward.h) under the host tile policy, the blocks
// of a pass shared out by OpenMP. What the CPU tests of the fused path test is the kernels' tiling,
// masking, online softmax, dropout and register fragments; the unfused ops remain the CPU's fast
// path.
#include <algorithm>
#include <new>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/flash_args.h"
#include "kiln/backend/route.h"

namespace kiln::ops::cpu {
namespace {

// This thread's shared memory of a thread block, at least `bytes`, kept for its next blocks (freed
// with the thread).
char* block_memory(int64_t bytes) {
  struct Aligned {
    char* data = nullptr;
    int64_t size = 0;
    ~Aligned() { ::operator delete[](data, std::align_val_t(64)); }
  };
  thread_local Aligned m;
  if (m.size < bytes) {
    ::operator delete[](m.data, std::align_val_t(64));
    m.data = static_cast<char*>(::operator new[](size_t(bytes), std::align_val_t(64)));
    m.size = bytes;
  }
  return m.data;
}

// block(b, h, first row, shared memory) for every (b, h, block of `rows` rows) of the shape.
template <typename Block>
void for_each_block(const cuda::FlashShape& s, int rows, int64_t smem_bytes, const Block& block) {
  const int64_t per_head = cuda::flash_blocks(s.S, rows), n = s.B * s.heads * per_head;
#pragma omp parallel for schedule(dynamic) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / (s.heads * per_head), h = i / per_head % s.heads;
    block(b, h, i % per_head * rows, block_memory(smem_bytes));
  }
}

}  // namespace

void flash_attention_forward(Context& ctx, const MatView& q, const MatView& k, const MatView& v, const Tensor& mask,
                             const DropoutMask& drop, float scale, const MatView& context, Tensor& row_lse,
                             Tensor& keep_bits) {
  const char* op = "flash_attention_forward";
  const OpScope scope =
      expect_cpu(ctx, op, {&q.t, &k.t, &v.t, &mask, &context.t, &row_lse, &keep_bits, &drop.sample_offset});
  cuda::with_float_type(q.t.dtype, [&]<typename T>(T) {
    const auto a = flash_forward_args<T>(q, k, v, mask, drop, scale, context, row_lse, keep_bits);
    for_each_block(a.shape, cuda::kFlashForward.outer, cuda::flash_forward_smem_bytes<T>(int(a.shape.d)),
                   [&](int64_t b, int64_t h, int64_t q0, char* smem) {
                     cuda::flash_forward_block(cuda::HostTiles{}, a, b, h, q0, smem);
                   });
  });
}

void flash_attention_backward(Context& ctx, const MatView& q, const MatView& k, const MatView& v,
                              const MatView& context, const MatView& dcontext, const Tensor& mask,
                              const DropoutMask& drop, float scale, const Tensor& row_lse, const Tensor& keep_bits,
                              const MatView& dq, const MatView& dk, const MatView& dv) {
  const char* op = "flash_attention_backward";
  const OpScope scope = expect_cpu(ctx, op, {&q.t, &k.t, &v.t, &context.t, &dcontext.t, &mask, &row_lse, &keep_bits,
                                            &dq.t, &dk.t, &dv.t, &drop.sample_offset});
  const ScratchScope own_scratch(ctx);
  Tensor row_dots = ctx.scratch_tensor(row_lse.shape, DType::f32);
  cuda::with_float_type(q.t.dtype, [&]<typename T>(T) {
    const auto a = flash_backward_args<T>(q, k, v, context, dcontext, mask, drop, scale, row_lse, keep_bits, dq, dk, dv,
                                          row_dots);
    const cuda::FlashRowDotsBody<T> dots{a};
    const int64_t rows = row_dots.numel();
#pragma omp parallel for if (rows > 1024)
    for (int64_t i = 0; i < rows; ++i) dots(i);
    const int64_t smem = cuda::flash_backward_smem_bytes<T>(int(a.shape.d));
    for_each_block(a.shape, cuda::kFlashKeyPass.outer, smem, [&](int64_t b, int64_t h, int64_t k0, char* m) {
      cuda::flash_backward_key_block(cuda::HostTiles{}, a, b, h, k0, m);
    });
    for_each_block(a.shape, cuda::kFlashQueryPass.outer, smem, [&](int64_t b, int64_t h, int64_t q0, char* m) {
      cuda::flash_backward_query_block(cuda::HostTiles{}, a, b, h, q0, m);
    });
  });
}

}  // namespace kiln::ops::cpu
