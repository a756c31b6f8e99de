// backend/cpu/pool.cc — max pooling and global average pooling over NHWC activations, written
// once for f32 / bf16 / f16 storage (comparisons and sums in f32). Max pooling's backward is a
// gather: each input element sums the gradients routed to it in output order, as the CUDA body
// does, so the backends agree bit for bit at any thread count.
#include <algorithm>
#include <limits>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/pool_cover.h"
#include "kiln/backend/route.h"

namespace kiln::ops::cpu {

using cpu::load;

namespace {

// The window's first valid tap starts the running max; a later tap replaces it only where it is
// larger (so the first maximum in scan order wins, and a NaN that started it stays).
template <typename T>
void take_larger(const T* x, int32_t pos, int64_t C, bool first, float* best, int32_t* at) {
  if (first) {
    for (int64_t c = 0; c < C; ++c) best[c] = load(x[c]), at[c] = pos;
    return;
  }
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const float v = load(x[c]);
    const bool larger = v > best[c];
    best[c] = larger ? v : best[c];
    at[c] = larger ? pos : at[c];
  }
}

// sum[c] += dy[c] where output element c's maximum was at input position pos.
template <typename T>
void add_routed(const T* dy, const int32_t* argmax, int32_t pos, int64_t C, float* sum) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const float g = load(dy[c]);
    sum[c] += argmax[c] == pos ? g : 0.0f;
  }
}

}  // namespace

void maxpool_forward(Context& ctx, const PoolShape& s, const Tensor& x, Tensor& y,
                     Tensor& argmax) {
  const char* op = "maxpool_forward";
  const OpScope scope = expect_cpu(ctx, op, {&x, &y, &argmax});
  const int64_t P = s.P(), Q = s.Q(), C = s.C;
  const ScratchScope own_scratch(ctx);
  Tensor running_max = ctx.scratch_tensor({s.N * P, C}, DType::f32);  // per output row
  float* const bests = running_max.ptr<float>();
  cpu::dispatch_float(x.dtype, op, [&]<typename T>(T) {
    const T* x0 = x.ptr<T>();
    T* y0 = y.ptr<T>();
    int32_t* a0 = argmax.ptr<int32_t>();
#pragma omp parallel
    {
#pragma omp for collapse(2) schedule(static)
      for (int64_t n = 0; n < s.N; ++n)
        for (int64_t p = 0; p < P; ++p) {
          float* const best = bests + (n * P + p) * C;  // the window's running max
          const T* xn = x0 + n * s.H * s.W * C;
          for (int64_t q = 0; q < Q; ++q) {
            const int64_t o = ((n * P + p) * Q + q) * C;
            int32_t* ao = a0 + o;
            bool first = true;
            for (int64_t i = 0; i < s.R; ++i) {
              const int64_t h = p * s.stride_h - s.pad_h + i;
              if (h < 0 || h >= s.H) continue;
              for (int64_t j = 0; j < s.S; ++j) {
                const int64_t w = q * s.stride_w - s.pad_w + j;
                if (w < 0 || w >= s.W) continue;
                take_larger(xn + (h * s.W + w) * C, int32_t(h * s.W + w), C, first, best, ao);
                first = false;
              }
            }
            if (first) {  // a window wholly in the padding
              std::fill(best, best + C, -std::numeric_limits<float>::infinity());
              std::fill(ao, ao + C, -1);
            }
            for (int64_t c = 0; c < C; ++c) y0[o + c] = cpu::store<T>(best[c]);
          }
        }
    }
  });
}

void maxpool_backward(Context& ctx, const PoolShape& s, const Tensor& dy, const Tensor& argmax,
                      Tensor& dx) {
  const char* op = "maxpool_backward";
  const OpScope scope = expect_cpu(ctx, op, {&dy, &argmax, &dx});
  const int64_t P = s.P(), Q = s.Q(), C = s.C;
  const ScratchScope own_scratch(ctx);
  Tensor pixel_sums = ctx.scratch_tensor({s.N * s.H, C}, DType::f32);  // per input row
  Tensor covers = ctx.scratch_tensor({s.W, 2}, DType::i64);             // PoolCover of each column
  float* const sums = pixel_sums.ptr<float>();
  int64_t* const column_covers = covers.ptr<int64_t>();
  for (int64_t w = 0; w < s.W; ++w) {
    const PoolCover c = pool_cover(w, s.pad_w, s.S, s.stride_w, Q);
    column_covers[2 * w] = c.first;
    column_covers[2 * w + 1] = c.last;
  }
  cpu::dispatch_float(dy.dtype, op, [&]<typename T>(T) {
    const T* dy0 = dy.ptr<T>();
    const int32_t* a0 = argmax.ptr<int32_t>();
    T* dx0 = dx.ptr<T>();
#pragma omp parallel
    {
#pragma omp for collapse(2) schedule(static)
      for (int64_t n = 0; n < s.N; ++n)
        for (int64_t h = 0; h < s.H; ++h) {
          float* const sum = sums + (n * s.H + h) * C;  // one input pixel's gradient
          const PoolCover rows = pool_cover(h, s.pad_h, s.R, s.stride_h, P);
          for (int64_t w = 0; w < s.W; ++w) {
            const PoolCover cols{column_covers[2 * w], column_covers[2 * w + 1]};
            const int32_t pos = int32_t(h * s.W + w);
            std::fill(sum, sum + C, 0.0f);
            for (int64_t p = rows.first; p <= rows.last; ++p)
              for (int64_t q = cols.first; q <= cols.last; ++q) {
                const int64_t o = ((n * P + p) * Q + q) * C;
                add_routed(dy0 + o, a0 + o, pos, C, sum);
              }
            T* out = dx0 + ((n * s.H + h) * s.W + w) * C;
            for (int64_t c = 0; c < C; ++c) out[c] = cpu::store<T>(sum[c]);
          }
        }
    }
  });
}

void global_avgpool_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "global_avgpool_forward";
  const OpScope scope = expect_cpu(ctx, op, {&x, &y});
  const int64_t HW = x.dim(1) * x.dim(2);
  const int64_t N = x.dim(0), C = x.dim(3);
  const ScratchScope own_scratch(ctx);
  Tensor image_sums = ctx.scratch_tensor({N, C}, DType::f32);  // (N, C) in f32
  float* const sums = image_sums.ptr<float>();
  cpu::dispatch_float(x.dtype, op, [&]<typename S>(S) {
    cpu::dispatch_float(y.dtype, op, [&]<typename D>(D) {
      const S* x0 = x.ptr<S>();
      D* y0 = y.ptr<D>();
      const float inv = 1.0f / float(HW);
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        float* yn = sums + n * C;
        std::fill(yn, yn + C, 0.0f);
        for (int64_t i = 0; i < HW; ++i) {
          const S* xi = x0 + (n * HW + i) * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) yn[c] += load(xi[c]);
        }
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) y0[n * C + c] = cpu::store<D>(yn[c] * inv);
      }
    });
  });
}

void global_avgpool_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  const char* op = "global_avgpool_backward";
  const OpScope scope = expect_cpu(ctx, op, {&dy, &dx});
  const int64_t HW = dx.dim(1) * dx.dim(2);
  const int64_t N = dx.dim(0), C = dx.dim(3);
  cpu::dispatch_float(dy.dtype, op, [&]<typename S>(S) {
    cpu::dispatch_float(dx.dtype, op, [&]<typename D>(D) {
      const S* dy0 = dy.ptr<S>();
      D* dx0 = dx.ptr<D>();
      const float inv = 1.0f / float(HW);
#pragma omp parallel for collapse(2) schedule(static) if (N * HW * C > 16384)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) {
          D* dxi = dx0 + (n * HW + i) * C;
          const S* dyn = dy0 + n * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) dxi[c] = cpu::store<D>(load(dyn[c]) * inv);
        }
    });
  });
}

}  // namespace kiln::ops::cpu
