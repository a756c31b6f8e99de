// backend/cuda/attention.cu — the fused attention kernels: attention_forward.h's and
// attention_backward.h's block algorithms with DeviceTiles, whose products are on sm_90a the
// warpgroup's wgmma (A in registers, B read by the tensor cores from shared memory), elsewhere each
// warp's mma.sync m16n8k16 (B fragments loaded by the lanes or ldmatrix.trans); one kernel per head
// dim so that the fragments' arrays are registers. The S x S block is never in global memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kiln/backend/cuda/attention_launch.h"
#include "kiln/backend/cuda/launch.cuh"
#include "kiln/backend/cuda/tensor_core_asm.cuh"

namespace kiln::ops::cuda {
namespace {

// One thread's registers of type X.
template <typename X>
struct DeviceRegs {
  X x;
  KILN_HD X& operator[](int) { return x; }
};

// One thread block: a phase's items strided over its threads, syncs as barriers, a thread's
// registers its own, the warps' collective steps as tensor-core products, shuffles and ldmatrix,
// the products P's (attention_launch.h). Host-device only so that the host-device block algorithms
// may call it; kernels alone do.
template <FlashProducts P>
struct DeviceTiles {
  template <typename X>
  using Regs = DeviceRegs<X>;
  template <typename F>
  KILN_HD void for_each(int n, F&& f) const {
#if defined(__CUDA_ARCH__)
    for (int i = int(threadIdx.x); i < n; i += kFlashThreads) f(i);
#endif
  }
  template <typename F>
  KILN_HD void threads(F&& f) const {
#if defined(__CUDA_ARCH__)
    f(int(threadIdx.x));
#endif
  }
  KILN_HD void sync() const {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (P == FlashProducts::best) fence_shared_for_wgmma();
#endif
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
  // cp.async: 16 bytes, bypassing L1 (the streamed rows are read once a block), zeros where the
  // source size is 0.
  template <typename T>
  KILN_HD void copy_async(T* dst, const T* src, bool valid) const {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(unsigned(__cvta_generic_to_shared(dst))),
                 "l"(__cvta_generic_to_global(src)), "r"(valid ? 16 : 0)
                 : "memory");
#endif
  }
  KILN_HD void commit_copies() const {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
  }
  template <int n>
  KILN_HD void wait_copies() const {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
#endif
  }
  template <typename X, typename FC, typename FA, typename FB>
  KILN_HD void mma(Regs<X>& r, FC c, FA a, FB b) const {
#if defined(__CUDA_ARCH__)
    mma_16816(c(r.x), a(r.x), b(r.x));
#endif
  }
  template <typename X, typename F>
  KILN_HD void quad_max(Regs<X>& r, F v) const {
#if defined(__CUDA_ARCH__)
    float& x = v(r.x);
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
#endif
  }
  template <typename X, typename F>
  KILN_HD void quad_sum(Regs<X>& r, F v) const {
#if defined(__CUDA_ARCH__)
    float& x = v(r.x);
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
#endif
  }
  template <typename X, typename From, typename To, typename Src>
  KILN_HD void gather(Regs<X>& r, From from, To to, Src src) const {
#if defined(__CUDA_ARCH__)
    to(r.x) = __shfl_sync(0xffffffffu, from(r.x), src(int(threadIdx.x) % 32));
#endif
  }
  template <typename X, typename F, typename T>
  KILN_HD void b_of_cols(Regs<X>& r, F b, const T* tile, int cols, int k0, int n0) const {
#if defined(__CUDA_ARCH__)
    b(r.x) = ldmatrix_b_of_cols(tile, cols, k0, n0);
#endif
  }
  // On sm_90a the warpgroup's wgmma per k-step, one group waited for (unless P asks for the
  // warps'); elsewhere warp_products.
  template <int N, int K, BOf kind, typename X, typename FC, typename FA, typename T>
  KILN_HD void products(Regs<X>& r, FC c, FA a, const T* tile, int cols) const {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (P == FlashProducts::best) {
      CFrag* d = c(r.x);
      const auto address = uint32_t(__cvta_generic_to_shared(tile));
      wgmma_hold<N>(d);
      wgmma_fence();
      KILN_UNROLL for (int kk = 0; kk < K / 16; ++kk)
        wgmma<N, kind == BOf::cols>(d, a(r.x, kk), wgmma_b_desc(address, cols, kind, kk));
      wgmma_commit_and_wait();
      wgmma_hold<N>(d);
      KILN_UNROLL for (int kk = 0; kk < K / 16; ++kk) wgmma_hold(a(r.x, kk));
    } else {
      warp_products<N, K, kind>(*this, r, c, a, tile, cols);
    }
#else
    warp_products<N, K, kind>(*this, r, c, a, tile, cols);
#endif
  }
};

// Whether this compilation builds the kernels of products P: the `warp` ones only for sm_90a (on
// every other target the `best` ones are the warps' already; the launchers only start `warp` ones on
// a 9.0 device, whose code is the sm_90a cubin).
template <FlashProducts P>
KILN_HD constexpr bool flash_kernels_built() {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  return P == FlashProducts::best;
#else
  return true;
#endif
}

template <typename T, int D, FlashProducts P>
__global__ void __launch_bounds__(kFlashThreads) flash_forward_kernel(FlashForwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  if constexpr (flash_kernels_built<P>())
    flash_forward_rows<D>(DeviceTiles<P>{}, a, blockIdx.z, blockIdx.y, int64_t(blockIdx.x) * kFlashForward.outer,
                          smem);
}

template <typename T, int D, FlashProducts P>
__global__ void __launch_bounds__(kFlashThreads) flash_key_pass_kernel(FlashBackwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  if constexpr (flash_kernels_built<P>())
    flash_key_pass_rows<D>(DeviceTiles<P>{}, a, blockIdx.z, blockIdx.y, int64_t(blockIdx.x) * kFlashKeyPass.outer,
                           smem);
}

template <typename T, int D, FlashProducts P>
__global__ void __launch_bounds__(kFlashThreads) flash_query_pass_kernel(FlashBackwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  if constexpr (flash_kernels_built<P>())
    flash_query_pass_rows<D>(DeviceTiles<P>{}, a, blockIdx.z, blockIdx.y,
                             int64_t(blockIdx.x) * kFlashQueryPass.outer, smem);
}

// fn.template operator()<D, P>() with D = flash_tile_dim(d) and P = products.
template <typename Fn>
void with_flash_kernels(int64_t d, FlashProducts products, Fn&& fn) {
  with_flash_head_dim(d, [&]<int D>() {
    if (products == FlashProducts::warp) fn.template operator()<D, FlashProducts::warp>();
    else fn.template operator()<D, FlashProducts::best>();
  });
}

dim3 grid_of(const FlashShape& s, int rows) {
  return dim3(unsigned(flash_blocks(s.S, rows)), unsigned(s.heads), unsigned(s.B));
}

// An empty batch launches nothing: a grid with a zero dimension is an invalid configuration.
bool has_blocks(const FlashShape& s) { return s.B > 0 && s.heads > 0; }

}  // namespace

template <typename T>
cudaError_t launch_flash_forward(const FlashForwardArgs<T>& a, void* stream, FlashProducts products) {
  if (!has_blocks(a.shape)) return cudaSuccess;
  const int bytes = int(flash_forward_smem_bytes<T>(int(a.shape.d)));
  cudaError_t err = cudaSuccess;
  with_flash_kernels(a.shape.d, products, [&]<int D, FlashProducts P>() {
    err = cudaFuncSetAttribute(flash_forward_kernel<T, D, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (err != cudaSuccess) return;
    flash_forward_kernel<T, D, P><<<grid_of(a.shape, kFlashForward.outer), kFlashThreads, bytes,
                                    static_cast<cudaStream_t>(stream)>>>(a);
  });
  return err;
}

template <typename T>
cudaError_t launch_flash_backward(const FlashBackwardArgs<T>& a, void* stream, FlashProducts products) {
  if (!has_blocks(a.shape)) return cudaSuccess;
  const int bytes = int(flash_backward_smem_bytes<T>(int(a.shape.d)));
  const auto s = static_cast<cudaStream_t>(stream);
  launch(a.shape.B * a.shape.heads * a.shape.S, FlashRowDotsBody<T>{a}, stream);
  cudaError_t err = cudaSuccess;
  with_flash_kernels(a.shape.d, products, [&]<int D, FlashProducts P>() {
    for (const void* kernel : {reinterpret_cast<const void*>(flash_key_pass_kernel<T, D, P>),
                               reinterpret_cast<const void*>(flash_query_pass_kernel<T, D, P>)}) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      if (err != cudaSuccess) return;
    }
    flash_key_pass_kernel<T, D, P><<<grid_of(a.shape, kFlashKeyPass.outer), kFlashThreads, bytes, s>>>(a);
    flash_query_pass_kernel<T, D, P><<<grid_of(a.shape, kFlashQueryPass.outer), kFlashThreads, bytes, s>>>(a);
  });
  return err;
}

template cudaError_t launch_flash_forward(const FlashForwardArgs<bf16_t>&, void*, FlashProducts);
template cudaError_t launch_flash_forward(const FlashForwardArgs<f16_t>&, void*, FlashProducts);
template cudaError_t launch_flash_backward(const FlashBackwardArgs<bf16_t>&, void*, FlashProducts);
template cudaError_t launch_flash_backward(const FlashBackwardArgs<f16_t>&, void*, FlashProducts);

}  // namespace kiln::ops::cuda
