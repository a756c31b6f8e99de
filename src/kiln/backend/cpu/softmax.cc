// backend/cpu/softmax.cc — row softmax, BERT's masked attention softmax, and the attention
// probabilities fused with their dropout (forward, and backward with the mask made once); any
// float storage, f32 arithmetic.
// GCC 12's false warnings on inlined AVX-512 intrinsics (backend/cpu/philox_lanes.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <algorithm>
#include <cmath>
#include <new>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/philox_lanes.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/cpu/vec_math.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 8192;

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

// This thread's f32 row buffer `which` (0, 1 or 2) of at least `cols` floats, kept for its next
// rows. Not a thread_local array: static TLS is allocated and zeroed for every thread the process
// starts (OpenMP's, the data loaders'), each template instantiation its own: 27 arrays of 256 KiB
// cost every thread 7 MiB of resident memory.
float* row_buffer(int which, int64_t cols) {
  thread_local AlignedFloats buffers[3];
  AlignedFloats& b = buffers[which];
  if (b.size < cols) {
    ::operator delete[](b.data, std::align_val_t(64));
    b.data = static_cast<float*>(::operator new[](size_t(cols) * sizeof(float), std::align_val_t(64)));
    b.size = cols;
  }
  return b.data;
}

// Asks for the next row's operands while this row is computed: a row's loads are otherwise
// latency-bound behind its exponentials or its mask.
template <typename A, typename B>
void prefetch_row(const A* a, const B* b, int64_t cols) {
  for (int64_t c = 0; c < cols; c += 64 / sizeof(A)) __builtin_prefetch(a + c);
  for (int64_t c = 0; c < cols; c += 64 / sizeof(B)) __builtin_prefetch(b + c);
}

// probs row r = softmax(scores row r + key bias of its batch row), then after_row(r, probs row).
template <typename X, typename Y, typename AfterRow>
void attention_rows(const Tensor& scores, const Tensor& mask, Tensor& probs, AfterRow after_row) {
  const int64_t per_batch = scores.dim(1) * scores.dim(2), Sk = scores.dim(3), rows = scores.dim(0) * per_batch;
  const int32_t* m = mask.ptr<int32_t>();
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
      Y* y = probs.ptr<Y>() + r * Sk;
      const X* x = scores.ptr<X>() + r * Sk;
      if (r + 1 < rows) prefetch_row(x + Sk, y + Sk, Sk);
      softmax_row(x, key_bias, Sk, tmp, y);
      after_row(r, static_cast<const Y*>(y));
    }
  }
}

// A dropout mask over the rows of a sample-major tensor, as dropout_forward applies it.
struct RowDropout {
  uint64_t seed, stream, first_sample;
  int64_t cols, rows_per_sample, element_offset;
  float p, scale;

  // keep[c] = 0 (dropped) or 1 for the elements of row r.
  void keep(int64_t r, float* out) const {
    const int64_t s = r / rows_per_sample, first = element_offset + r % rows_per_sample * cols;
    dropout_keep_span(seed, stream, uint32_t(first_sample + uint64_t(s)), first, cols, p, out);
  }
  // dropout_forward's value for an element x.
  float apply(float keep, float x) const {
    const float kept = x * scale;
    return keep != 0.0f ? kept : 0.0f;
  }
};

// One row of attention_probs_backward, given its mask `keep`; dp: scratch for the row.
template <typename Y, typename D>
void probs_backward_row(const RowDropout& d, const Y* y, const D* g, float scale, float* dp, const float* keep,
                        Y* ds, Y* kept) {
  const int64_t cols = d.cols;
  float dot = 0.0f;  // as softmax_backward over dropout_backward's output
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) dp[c] = cpu::load(cpu::store<D>(d.apply(keep[c], cpu::load(g[c]))));
#pragma omp simd reduction(+ : dot)
  for (int64_t c = 0; c < cols; ++c) dot += cpu::load(y[c]) * dp[c];
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    const float v = cpu::load(y[c]);  // read before ds[c] is written: ds may be y
    kept[c] = cpu::store<Y>(d.apply(keep[c], v));
    ds[c] = cpu::store<Y>(scale * v * (dp[c] - dot));
  }
}

RowDropout row_dropout(const DropoutMask& d, const Tensor& t) {
  const int64_t cols = t.dim(-1), per = t.numel() / d.samples;
  return {d.rng.seed, d.rng.stream, uint64_t(d.sample_offset.ptr<int64_t>()[0]), cols, per / cols,
          d.element_offset, d.p, 1.0f / (1.0f - d.p)};
}

}  // namespace

void softmax_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const OpScope scope = expect_cpu(ctx, "softmax_forward", {&x, &y});
  const int64_t cols = x.dim(-1), rows = x.numel() / cols;
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
  const int64_t cols = y.dim(-1), rows = y.numel() / cols;
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
  const char* op = "attention_softmax_forward";
  const OpScope scope = expect_cpu(ctx, op, {&scores, &mask, &probs});
  cpu::dispatch_float(scores.dtype, op, [&]<typename X>(X) {
    cpu::dispatch_float(probs.dtype, op, [&]<typename Y>(Y) {
      attention_rows<X, Y>(scores, mask, probs, [](int64_t, const Y*) {});
    });
  });
}

void attention_probs_forward(Context& ctx, const Tensor& scores, const Tensor& mask, const DropoutMask& drop,
                             Tensor& probs, Tensor& dropped) {
  const char* op = "attention_probs_forward";
  const OpScope scope = expect_cpu(ctx, op, {&scores, &mask, &probs, &dropped, &drop.sample_offset});
  const RowDropout d = row_dropout(drop, probs);
  cpu::dispatch_float(scores.dtype, op, [&]<typename X>(X) {
    cpu::dispatch_float(probs.dtype, op, [&]<typename Y>(Y) {
      attention_rows<X, Y>(scores, mask, probs, [&](int64_t r, const Y* p) {
        float* keep = row_buffer(2, d.cols);
        d.keep(r, keep);
        Y* out = dropped.ptr<Y>() + r * d.cols;
#pragma omp simd
        for (int64_t c = 0; c < d.cols; ++c) out[c] = cpu::store<Y>(d.apply(keep[c], cpu::load(p[c])));
      });
    });
  });
}

void attention_probs_backward(Context& ctx, const Tensor& probs, Tensor& dprobs, const DropoutMask& drop,
                              float scale, Tensor& dscores, Tensor& dropped) {
  const char* op = "attention_probs_backward";
  const OpScope scope = expect_cpu(ctx, op, {&probs, &dprobs, &dscores, &dropped, &drop.sample_offset});
  const RowDropout d = row_dropout(drop, probs);
  const int64_t cols = d.cols, rows = probs.numel() / cols;
  cpu::dispatch_float(probs.dtype, op, [&]<typename Y>(Y) {
    cpu::dispatch_float(dprobs.dtype, op, [&]<typename D>(D) {
#pragma omp parallel if (rows * cols > kParallelMin)
      {
        float *keep = row_buffer(0, cols), *dp = row_buffer(1, cols);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
          const Y* y = probs.ptr<Y>() + r * cols;
          const D* g = dprobs.ptr<D>() + r * cols;
          if (r + 1 < rows) prefetch_row(y + cols, g + cols, cols);
          d.keep(r, keep);
          probs_backward_row(d, y, g, scale, dp, keep, dscores.ptr<Y>() + r * cols, dropped.ptr<Y>() + r * cols);
        }
      }
    });
  });
}

}  // namespace kiln::ops::cpu
