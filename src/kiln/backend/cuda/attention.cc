// backend/cuda/attention.cc — fused attention on CUDA: checks, then the kernels of attention.cu
// (bf16 / f16 only: the products run on the tensor cores; f32 attention is the unfused path's).
#include <cstdlib>
#include <cstring>

#include "kiln/backend/cuda/attention_launch.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/backend/flash_args.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// fn(T{}) with T bf16_t or f16_t; f32 is refused.
template <typename Fn>
void with_half_type(const char* op, DType dtype, Fn&& fn) {
  KILN_CHECK(dtype == DType::bf16 || dtype == DType::f16,
             "op {}: the CUDA kernel takes bf16 or f16 (tensor cores), not {}; f32 attention takes the unfused path",
             op, dtype_name(dtype));
  if (dtype == DType::bf16) fn(bf16_t{});
  else fn(f16_t{});
}

// The kernel's blocks need `bytes` of shared memory; the device must have them.
void expect_shared_memory(const Context& ctx, const char* op, int64_t bytes, int64_t d) {
  int most = 0;
  check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device.index), op);
  KILN_CHECK(bytes <= most, "op {}: head dim {} needs {} KiB of shared memory per block, this GPU has {} KiB", op, d,
             bytes / 1024, most / 1024);
}

// KILN_FLASH_PRODUCTS: unset or `auto`, the device's best products; `warp`, the warps' mma.sync on
// an H100 / H200 too (a check comparing them with wgmma on one GPU; elsewhere they are the best).
FlashProducts flash_products(const Context& ctx, const char* op) {
  static const char* const v = std::getenv("KILN_FLASH_PRODUCTS");  // read once; the op runs every step
  if (!v || !*v || std::strcmp(v, "auto") == 0) return FlashProducts::best;
  KILN_CHECK(std::strcmp(v, "warp") == 0, "op {}: KILN_FLASH_PRODUCTS is '{}'; it takes auto or warp", op, v);
  int major = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx.device.index), op);
  return major == 9 ? FlashProducts::warp : FlashProducts::best;
}

}  // namespace

void flash_attention_forward(Context& ctx, const MatView& q, const MatView& k, const MatView& v, const Tensor& mask,
                             const DropoutMask& drop, float scale, const MatView& context, Tensor& row_lse,
                             Tensor& keep_bits) {
  const char* op = "flash_attention_forward";
  const OpScope scope =
      expect_cuda(ctx, op, {&q.t, &k.t, &v.t, &mask, &context.t, &row_lse, &keep_bits, &drop.sample_offset});
  with_half_type(op, q.t.dtype, [&]<typename T>(T) {
    const auto a = flash_forward_args<T>(q, k, v, mask, drop, scale, context, row_lse, keep_bits);
    expect_shared_memory(ctx, op, flash_forward_smem_bytes<T>(int(a.shape.d)), a.shape.d);
    check(launch_flash_forward(a, ctx.stream, flash_products(ctx, op)), op);
    check_launch(op);
  });
}

void flash_attention_backward(Context& ctx, const MatView& q, const MatView& k, const MatView& v,
                              const MatView& context, const MatView& dcontext, const Tensor& mask,
                              const DropoutMask& drop, float scale, const Tensor& row_lse, const Tensor& keep_bits,
                              const MatView& dq, const MatView& dk, const MatView& dv) {
  const char* op = "flash_attention_backward";
  const OpScope scope = expect_cuda(ctx, op, {&q.t, &k.t, &v.t, &context.t, &dcontext.t, &mask, &row_lse, &keep_bits,
                                            &dq.t, &dk.t, &dv.t, &drop.sample_offset});
  const ScratchScope own_scratch(ctx);
  Tensor row_dots = ctx.scratch_tensor(row_lse.shape, DType::f32);
  with_half_type(op, q.t.dtype, [&]<typename T>(T) {
    const auto a = flash_backward_args<T>(q, k, v, context, dcontext, mask, drop, scale, row_lse, keep_bits, dq, dk, dv,
                                          row_dots);
    expect_shared_memory(ctx, op, flash_backward_smem_bytes<T>(int(a.shape.d)), a.shape.d);
    check(launch_flash_backward(a, ctx.stream, flash_products(ctx, op)), op);
    check_launch(op);
  });
}

}  // namespace kiln::ops::cuda
