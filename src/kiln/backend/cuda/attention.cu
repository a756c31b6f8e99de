// backend/cuda/attention.cu — the fused attention kernels: attention_tiles.h's block algorithms
// with DeviceTiles, whose products are nvcuda::wmma 16x16x16 tensor-core fragments (bf16 / f16 in,
// f32 accumulated) over shared-memory tiles. wmma rather than raw mma.sync: its fragments' register
// layout is opaque, so every tile between two products lives in shared memory, where the host
// policy reads the same tile; the S x S block is in shared memory only, never in global memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "kiln/backend/cuda/attention_launch.h"

namespace kiln::ops::cuda {
namespace {

template <typename T>
struct WmmaType;
template <>
struct WmmaType<bf16_t> {
  using type = __nv_bfloat16;
};
template <>
struct WmmaType<f16_t> {
  using type = __half;
};

// The address of an operand's element (r, c) (of the operand, transposed or not).
template <typename T>
__device__ const typename WmmaType<T>::type* element_at(const TileRef<T>& t, int r, int c) {
  return reinterpret_cast<const typename WmmaType<T>::type*>(t.trans ? t.p + c * t.ld + r : t.p + r * t.ld + c);
}

// c (m, n) = (accumulate ? c : 0) + a (m, k) b (k, n): warp w takes the 16x16 tiles of c
// w, w + kFlashWarps, ..., summing over k in 16-wide steps.
template <typename T, typename LayoutA, typename LayoutB>
__device__ void wmma_product(const TileRef<T>& a, const TileRef<T>& b, float* c, int ldc, int m, int n, int k,
                             bool accumulate) {
  namespace wmma = nvcuda::wmma;
  using W = typename WmmaType<T>::type;
  const int tiles_n = n / 16, tiles = m / 16 * tiles_n;
  for (int tile = int(threadIdx.x) / 32; tile < tiles; tile += kFlashWarps) {
    const int i0 = tile / tiles_n * 16, j0 = tile % tiles_n * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    if (accumulate) wmma::load_matrix_sync(acc, c + i0 * ldc + j0, ldc, wmma::mem_row_major);
    else wmma::fill_fragment(acc, 0.0f);
    for (int l0 = 0; l0 < k; l0 += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, W, LayoutA> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, W, LayoutB> fb;
      wmma::load_matrix_sync(fa, element_at(a, i0, l0), unsigned(a.ld));
      wmma::load_matrix_sync(fb, element_at(b, l0, j0), unsigned(b.ld));
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c + i0 * ldc + j0, acc, unsigned(ldc), wmma::mem_row_major);
  }
}

// One thread block: a phase's items strided over its threads, syncs as barriers, tensor-core
// products. Host-device only so that the host-device block algorithms may call it; kernels alone
// do.
struct DeviceTiles {
  template <typename F>
  KILN_HD void for_each(int n, F&& f) const {
#if defined(__CUDA_ARCH__)
    for (int i = int(threadIdx.x); i < n; i += kFlashThreads) f(i);
#endif
  }
  KILN_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
  template <typename T>
  KILN_HD void gemm(TileRef<T> a, TileRef<T> b, float* c, int ldc, int m, int n, int k, bool accumulate) const {
#if defined(__CUDA_ARCH__)
    namespace wmma = nvcuda::wmma;
    if (a.trans && b.trans) wmma_product<T, wmma::col_major, wmma::col_major>(a, b, c, ldc, m, n, k, accumulate);
    else if (a.trans) wmma_product<T, wmma::col_major, wmma::row_major>(a, b, c, ldc, m, n, k, accumulate);
    else if (b.trans) wmma_product<T, wmma::row_major, wmma::col_major>(a, b, c, ldc, m, n, k, accumulate);
    else wmma_product<T, wmma::row_major, wmma::row_major>(a, b, c, ldc, m, n, k, accumulate);
#endif
  }
};

template <typename T>
__global__ void __launch_bounds__(kFlashThreads) flash_forward_kernel(FlashForwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  flash_forward_block(DeviceTiles{}, a, blockIdx.z, blockIdx.y, int64_t(blockIdx.x) * kFlashForward.outer, smem);
}

template <typename T>
__global__ void __launch_bounds__(kFlashThreads) flash_key_pass_kernel(FlashBackwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  flash_backward_key_block(DeviceTiles{}, a, blockIdx.z, blockIdx.y, int64_t(blockIdx.x) * kFlashKeyPass.outer,
                           smem);
}

template <typename T>
__global__ void __launch_bounds__(kFlashThreads) flash_query_pass_kernel(FlashBackwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  flash_backward_query_block(DeviceTiles{}, a, blockIdx.z, blockIdx.y,
                             int64_t(blockIdx.x) * kFlashQueryPass.outer, smem);
}

dim3 grid_of(const FlashShape& s, int rows) {
  return dim3(unsigned(flash_blocks(s.S, rows)), unsigned(s.heads), unsigned(s.B));
}

// An empty batch launches nothing: a grid with a zero dimension is an invalid configuration.
bool has_blocks(const FlashShape& s) { return s.B > 0 && s.heads > 0; }

}  // namespace

template <typename T>
cudaError_t launch_flash_forward(const FlashForwardArgs<T>& a, void* stream) {
  if (!has_blocks(a.shape)) return cudaSuccess;
  const int bytes = int(flash_forward_smem_bytes<T>(int(a.shape.d)));
  const cudaError_t err =
      cudaFuncSetAttribute(flash_forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != cudaSuccess) return err;
  flash_forward_kernel<T><<<grid_of(a.shape, kFlashForward.outer), kFlashThreads, bytes,
                            static_cast<cudaStream_t>(stream)>>>(a);
  return cudaSuccess;
}

template <typename T>
cudaError_t launch_flash_backward(const FlashBackwardArgs<T>& a, void* stream) {
  if (!has_blocks(a.shape)) return cudaSuccess;
  const int bytes = int(flash_backward_smem_bytes<T>(int(a.shape.d)));
  for (const void* kernel : {reinterpret_cast<const void*>(flash_key_pass_kernel<T>),
                             reinterpret_cast<const void*>(flash_query_pass_kernel<T>)}) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (err != cudaSuccess) return err;
  }
  const auto s = static_cast<cudaStream_t>(stream);
  flash_key_pass_kernel<T><<<grid_of(a.shape, kFlashKeyPass.outer), kFlashThreads, bytes, s>>>(a);
  flash_query_pass_kernel<T><<<grid_of(a.shape, kFlashQueryPass.outer), kFlashThreads, bytes, s>>>(a);
  return cudaSuccess;
}

template cudaError_t launch_flash_forward(const FlashForwardArgs<bf16_t>&, void*);
template cudaError_t launch_flash_forward(const FlashForwardArgs<f16_t>&, void*);
template cudaError_t launch_flash_backward(const FlashBackwardArgs<bf16_t>&, void*);
template cudaError_t launch_flash_backward(const FlashBackwardArgs<f16_t>&, void*);

}  // namespace kiln::ops::cuda
