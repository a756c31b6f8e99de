// backend/cpu/softmax.cc — row softmax and BERT's masked attention softmax; any float storage,
// f32 arithmetic.
#include <algorithm>
#include <cmath>
#include <new>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/cpu/vec_math.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 8192;
constexpr int64_t kMaxCols = 1 << 16;  // longest row

// y = softmax(x + bias) over one row of `cols`; bias may be null; y may alias x. The
// exponentials are kept in f32 (tmp) so rounding to y's storage happens once.
template <typename X, typename Y>
inline void softmax_row(const X* x, const float* bias, int64_t cols, float* tmp, Y* y) {
  if (bias) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) tmp[c] = cpu::load(x[c]) + bias[c];
  } else {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) tmp[c] = cpu::load(x[c]);
  }
  const float mx = row_max(tmp, cols);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) sum += (tmp[c] = vec::exp(tmp[c] - mx));
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) y[c] = cpu::store<Y>(tmp[c] * inv);
}

// 64-byte aligned floats on the heap, freed with the thread.
struct AlignedFloats {
  float* data = nullptr;
  int64_t size = 0;
  ~AlignedFloats() { ::operator delete[](data, std::align_val_t(64)); }
};

// This thread's f32 row buffer `which` (0 or 1) of at least `cols` floats, kept for its next
// rows. Not a thread_local array: static TLS is allocated and zeroed for every thread the process
// starts (OpenMP's, the data loaders'), each template instantiation its own: 27 arrays of 256 KiB
// cost every thread 7 MiB of resident memory.
float* row_buffer(int which, int64_t cols) {
  thread_local AlignedFloats buffers[2];
  AlignedFloats& b = buffers[which];
  if (b.size < cols) {
    ::operator delete[](b.data, std::align_val_t(64));
    b.data = static_cast<float*>(::operator new[](size_t(cols) * sizeof(float), std::align_val_t(64)));
    b.size = cols;
  }
  return b.data;
}

int64_t last_dim(const char* op, const Tensor& t) {
  KILN_CHECK(t.rank() >= 1 && t.dim(-1) > 0 && t.dim(-1) <= kMaxCols,
             "op {}: rows of {} must have 1..{} columns", op, shape_str(t.shape), kMaxCols);
  return t.dim(-1);
}

}  // namespace

void softmax_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const OpScope scope = expect_cpu(ctx, "softmax_forward", {&x, &y});
  expect_same_numel("softmax_forward", x, y);
  const int64_t cols = last_dim("softmax_forward", x), rows = x.numel() / cols;
  cpu::dispatch_float(x.dtype, "softmax_forward", [&]<typename X>(X) {
    cpu::dispatch_float(y.dtype, "softmax_forward", [&]<typename Y>(Y) {
#pragma omp parallel if (rows * cols > kParallelMin)
      {
        float* tmp = row_buffer(1, cols);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r)
          softmax_row(x.ptr<X>() + r * cols, nullptr, cols, tmp, y.ptr<Y>() + r * cols);
      }
    });
  });
}

void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, float scale, Tensor& dx) {
  const OpScope scope = expect_cpu(ctx, "softmax_backward", {&y, &dy, &dx});
  expect_same_numel("softmax_backward", y, dy);
  expect_same_numel("softmax_backward", y, dx);
  const int64_t cols = last_dim("softmax_backward", y), rows = y.numel() / cols;
  cpu::dispatch_float(y.dtype, "softmax_backward", [&]<typename Y>(Y) {
    cpu::dispatch_float(dy.dtype, "softmax_backward", [&]<typename D>(D) {
      cpu::dispatch_float(dx.dtype, "softmax_backward", [&]<typename O>(O) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelMin)
        for (int64_t r = 0; r < rows; ++r) {
          const Y* yr = y.ptr<Y>() + r * cols;
          const D* dyr = dy.ptr<D>() + r * cols;
          O* dxr = dx.ptr<O>() + r * cols;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int64_t c = 0; c < cols; ++c) dot += cpu::load(yr[c]) * cpu::load(dyr[c]);
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c)
            dxr[c] = cpu::store<O>(scale * cpu::load(yr[c]) * (cpu::load(dyr[c]) - dot));
        }
      });
    });
  });
}

void attention_softmax_forward(Context& ctx, const Tensor& scores, const Tensor& mask,
                               Tensor& probs) {
  const OpScope scope = expect_cpu(ctx, "attention_softmax_forward", {&scores, &mask, &probs});
  expect_same_numel("attention_softmax_forward", scores, probs);
  expect_dtype("attention_softmax_forward", "mask", mask, {DType::i32});
  KILN_CHECK(scores.rank() == 4 && mask.rank() == 2 && mask.dim(0) == scores.dim(0) &&
                 mask.dim(1) == scores.dim(3) && scores.dim(3) <= kMaxCols,
             "op attention_softmax_forward: scores {} (B, heads, Sq, Sk) with mask {} (B, Sk)",
             shape_str(scores.shape), shape_str(mask.shape));
  const int64_t B = scores.dim(0), per_batch = scores.dim(1) * scores.dim(2),
                Sk = scores.dim(3), rows = B * per_batch;
  const int32_t* m = mask.ptr<int32_t>();
  cpu::dispatch_float(scores.dtype, "attention_softmax_forward", [&]<typename X>(X) {
    cpu::dispatch_float(probs.dtype, "attention_softmax_forward", [&]<typename Y>(Y) {
#pragma omp parallel if (rows * Sk > kParallelMin)
      {
        float *key_bias = row_buffer(0, Sk), *tmp = row_buffer(1, Sk);
        int64_t bias_of = -1;  // the batch row key_bias holds
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t b = r / per_batch;
          if (b != bias_of) {
            for (int64_t k = 0; k < Sk; ++k) key_bias[k] = m[b * Sk + k] ? 0.0f : -10000.0f;
            bias_of = b;
          }
          softmax_row(scores.ptr<X>() + r * Sk, key_bias, Sk, tmp, probs.ptr<Y>() + r * Sk);
        }
      }
    });
  });
}

}  // namespace kiln::ops::cpu
