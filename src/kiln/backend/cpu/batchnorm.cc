// backend/cpu/batchnorm.cc — batch norm over NHWC rows with an optional fused ReLU, written once
// for f32 / bf16 / f16 activations (statistics and parameters f32). Channel sums run in f32 over
// at most kBnFloatRun rows, are added in double per fixed chunk of rows (backend/bn_sums.h), and
// the chunks are combined in order, so results do not depend on the thread count. Each row group
// of kBnGroup rows is summed in registers before it meets the accumulator row: the passes were
// bound by the accumulator's stores, one per row and channel (Zen 4 stores 256 bits a cycle).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kiln/backend/bn_sums.h"
#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/route.h"

namespace kiln::ops::cpu {
namespace {

using cpu::load;

// Asks for the cache lines kPrefetchBytes past the `count` elements at p. The forward's channel
// sums read x alone, one stream per thread, and the hardware prefetcher left them waiting on
// memory: Σx over (16, 56, 56, 256) bf16 read 28 GB/s from cold caches, 49 GB/s with this, the
// forward with its statistics 41 -> 52 GB/s (`op_times 2 bn`, medians of 6 alternated runs; no
// change at 64 channels). The backward's sums read two or three streams and gained little (48 -> 53
// GB/s without the ReLU, none with it), so they go without. A prefetch past the end of x does not
// fault.
constexpr uintptr_t kPrefetchBytes = 8192;
template <typename T>
inline void prefetch_ahead(const T* p, int64_t count) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + kPrefetchBytes;
  for (uintptr_t b = 0; b < uintptr_t(count) * sizeof(T); b += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + b));
}

// out[k*C + c] = Σ_r term_k(r, c) for k < K. f(r, n, acc) adds the terms of rows r .. r + n - 1
// into acc[k*C + c] (f32); n is a std::integral_constant, kBnGroup or 1, so its loop unrolls.
template <int K, typename F>
void channel_sums(int64_t rows, int64_t C, F f, double* out) {
  const int64_t chunk = bn_chunk_rows(rows);
  const int64_t chunks = (rows + chunk - 1) / chunk;
  // Reused across calls (one per calling thread): a fresh multi-megabyte buffer per call costs
  // page faults on every BatchNorm of every step. Workers see it through `base`, not by name.
  thread_local std::vector<double> partial;
  partial.assign(size_t(chunks * K * C), 0.0);
  double* const base = partial.data();
#pragma omp parallel for schedule(static) if (rows * C > 16384)
  for (int64_t b = 0; b < chunks; ++b) {
    thread_local std::vector<float> run;  // per worker, grown once to the widest K * C
    run.resize(size_t(K * C));
    double* acc = base + b * K * C;
    const int64_t end = std::min(rows, (b + 1) * chunk);
    for (int64_t r0 = b * chunk; r0 < end; r0 += kBnFloatRun) {
      std::fill(run.begin(), run.end(), 0.0f);
      const int64_t run_end = std::min(end, r0 + kBnFloatRun);
      int64_t r = r0;
      for (; r + kBnGroup <= run_end; r += kBnGroup) f(r, std::integral_constant<int64_t, kBnGroup>{}, run.data());
      for (; r < run_end; ++r) f(r, std::integral_constant<int64_t, 1>{}, run.data());
      for (int64_t i = 0; i < K * C; ++i) acc[i] += run[i];
    }
  }
  std::fill(out, out + K * C, 0.0);
  for (int64_t b = 0; b < chunks; ++b)
    for (int64_t i = 0; i < K * C; ++i) out[i] += base[b * K * C + i];
}

// Calls f(std::true_type) or f(std::false_type) as `on` says.
template <typename F>
void with_flag(bool on, F&& f) {
  if (on) f(std::true_type{});
  else f(std::false_type{});
}

// y = max?(x * a + b + residual?) per channel, rounded once to T (the CUDA body's expression).
template <bool Relu, bool Residual, typename T>
void scale_shift_rows(const T* x, const float* a, const float* b, const T* residual, int64_t rows, int64_t C,
                      T* y) {
#pragma omp parallel for schedule(static) if (rows * C > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      float v = load(xr[c]) * a[c] + b[c];
      if constexpr (Residual) v += load(residual[r * C + c]);
      if constexpr (Relu) v = std::max(v, 0.0f);
      yr[c] = cpu::store<T>(v);
    }
  }
}

// residual: null for none.
template <typename T>
void normalize(Context& ctx, const T* x, const float* gamma, const float* beta, const float* mean,
               const float* var, int64_t rows, int64_t C, float eps, bool relu, const T* residual, T* y) {
  // Per-channel vectors live in the op's scratch (the arena: nothing allocated in the steady state).
  Tensor scale_shift = ctx.scratch_tensor({2, C}, DType::f32);
  float *a = scale_shift.ptr<float>(), *b = a + C;
  for (int64_t c = 0; c < C; ++c) {
    const double rstd = 1.0 / std::sqrt(double(var[c]) + eps);
    a[c] = float(gamma[c] * rstd);
    b[c] = float(beta[c] - mean[c] * (gamma[c] * rstd));
  }
  with_flag(relu, [&](auto r) {
    with_flag(residual != nullptr, [&](auto join) {
      scale_shift_rows<decltype(r)::value, decltype(join)::value>(x, a, b, residual, rows, C, y);
    });
  });
}

// out[c] = Σ_r x[r, c].
template <typename T>
void sum_x(const T* x, int64_t rows, int64_t C, double* out) {
  channel_sums<1>(rows, C, [&](int64_t r, auto n, float* acc) {
    const T* xr = x + r * C;
    prefetch_ahead(xr, decltype(n)::value * C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      float s = 0.0f;
      for (int64_t i = 0; i < decltype(n)::value; ++i) s += load(xr[i * C + c]);
      acc[c] += s;
    }
  }, out);
}

// out[c] = Σ_r (x[r, c] - mean[c])², mean = sum / total_rows: a second pass around the mean, so
// no cancellation as in E[x²] - E[x]².
template <typename T>
void sum_squared_deviations(Context& ctx, const T* x, int64_t rows, int64_t C, const double* sum, int64_t total_rows,
                            double* out) {
  Tensor mean = ctx.scratch_tensor({C}, DType::f32);
  float* const mp = mean.ptr<float>();
  for (int64_t c = 0; c < C; ++c) mp[c] = float(sum[c] / double(total_rows));
  channel_sums<1>(rows, C, [&](int64_t r, auto n, float* acc) {
    const T* xr = x + r * C;
    prefetch_ahead(xr, decltype(n)::value * C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      float s = 0.0f;
      for (int64_t i = 0; i < decltype(n)::value; ++i) {
        const float d = load(xr[i * C + c]) - mp[c];
        s += d * d;
      }
      acc[c] += s;
    }
  }, out);
}

// shift[c] = the mean of channel c over the rows bn_shift_step apart, in f32.
template <typename T>
void sampled_mean(const T* x, int64_t rows, int64_t C, float* sp) {
  const int64_t every = bn_shift_step(rows);
  std::fill(sp, sp + C, 0.0f);
  for (int64_t r = 0; r < rows; r += every)
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) sp[c] += load(x[r * C + c]);
  for (int64_t c = 0; c < C; ++c) sp[c] /= float(bn_shift_samples(rows));
}

// s[c] = Σ_r d, s[C + c] = Σ_r d², d = x[r, c] - shift[c].
template <typename T>
void shifted_sums(const T* x, int64_t rows, int64_t C, const float* shift, double* s) {
  channel_sums<2>(rows, C, [&](int64_t r, auto n, float* acc) {
    const T* xr = x + r * C;
    prefetch_ahead(xr, decltype(n)::value * C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      float d1 = 0.0f, d2 = 0.0f;
      for (int64_t i = 0; i < decltype(n)::value; ++i) {
        const float d = load(xr[i * C + c]) - shift[c];
        d1 += d;
        d2 += d * d;
      }
      acc[c] += d1;
      acc[C + c] += d2;
    }
  }, s);
}

// mean, var (biased) of x's channels from one read of x (the two-pass sums read it twice): var =
// E[d²] - E[d]² with d = x - shift. The shift, a sampled mean, lies near the mean (within about
// σ / 8 for well-spread data, 30σ in the parity test's worst case), so E[d²] stays close to var and
// the f32 rounding of its sums small against it, where E[x²] - E[x]² would cancel away a channel
// whose mean is large against its spread. The CUDA bodies (BnShiftBody, BnSum::shifted) mirror it.
template <typename T>
void train_statistics(Context& ctx, const T* x, int64_t rows, int64_t C, float* mean, float* var) {
  Tensor shift_values = ctx.scratch_tensor({C}, DType::f32), sums = ctx.scratch_tensor({2 * C}, DType::f64);
  float* const shift = shift_values.ptr<float>();
  double* const s = sums.ptr<double>();
  sampled_mean(x, rows, C, shift);
  shifted_sums(x, rows, C, shift, s);
  for (int64_t c = 0; c < C; ++c) {
    const double m = s[c] / double(rows);
    mean[c] = float(double(shift[c]) + m);
    var[c] = float(std::max(0.0, s[C + c] / double(rows) - m * m));
  }
}

void stats_from_sums(const double* sum, const double* squares, int64_t rows, int64_t C, float* mean, float* var) {
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = float(sum[c] / double(rows));
    var[c] = float(squares[c] / double(rows));
  }
}

// The rows of x (rows, C).
int64_t rows_of(const Tensor& x) { return x.numel() / x.dim(-1); }

const float* f32(const Tensor& t) { return t.ptr<float>(); }

// The residual's elements, or null when it is undefined.
template <typename T>
const T* residual_of(const Tensor& residual) {
  return residual.defined() ? residual.ptr<T>() : nullptr;
}

}  // namespace

void batchnorm_train_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                             const Tensor& beta, float eps, bool relu, Tensor& y, Tensor& mean,
                             Tensor& var, const Tensor& residual) {
  const OpScope scope = expect_cpu(ctx, "batchnorm_train_forward",
                                   {&x, &gamma, &beta, &y, &mean, &var, &residual});
  const int64_t rows = rows_of(x), C = x.dim(-1);
  const ScratchScope own_scratch(ctx);
  cpu::dispatch_float(x.dtype, "batchnorm_train_forward", [&]<typename T>(T) {
    train_statistics(ctx, x.ptr<T>(), rows, C, mean.ptr<float>(), var.ptr<float>());
    normalize(ctx, x.ptr<T>(), f32(gamma), f32(beta), f32(mean), f32(var), rows, C, eps, relu,
              residual_of<T>(residual), y.ptr<T>());
  });
}

void batchnorm_channel_sums(Context& ctx, const Tensor& x, Tensor& sum) {
  const char* op = "batchnorm_channel_sums";
  const OpScope scope = expect_cpu(ctx, op, {&x, &sum});
  const int64_t rows = rows_of(x);
  cpu::dispatch_float(x.dtype, op, [&]<typename T>(T) { sum_x(x.ptr<T>(), rows, x.dim(-1), sum.ptr<double>()); });
}

void batchnorm_channel_deviations(Context& ctx, const Tensor& x, const Tensor& sum, int64_t total_rows,
                                  Tensor& squares) {
  const char* op = "batchnorm_channel_deviations";
  const OpScope scope = expect_cpu(ctx, op, {&x, &sum, &squares});
  const int64_t rows = rows_of(x);
  const ScratchScope own_scratch(ctx);
  cpu::dispatch_float(x.dtype, op, [&]<typename T>(T) {
    sum_squared_deviations(ctx, x.ptr<T>(), rows, x.dim(-1), sum.ptr<double>(), total_rows, squares.ptr<double>());
  });
}

void batchnorm_stats_from_sums(Context& ctx, const Tensor& sum, const Tensor& squares, int64_t rows, Tensor& mean,
                               Tensor& var) {
  const char* op = "batchnorm_stats_from_sums";
  const OpScope scope = expect_cpu(ctx, op, {&sum, &squares, &mean, &var});
  stats_from_sums(sum.ptr<double>(), squares.ptr<double>(), rows, sum.numel(), mean.ptr<float>(), var.ptr<float>());
}

void batchnorm_eval_forward(Context& ctx, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& var, float eps,
                            bool relu, Tensor& y, const Tensor& residual) {
  const OpScope scope = expect_cpu(ctx, "batchnorm_eval_forward",
                                   {&x, &gamma, &beta, &mean, &var, &y, &residual});
  const int64_t rows = rows_of(x);
  const ScratchScope own_scratch(ctx);
  cpu::dispatch_float(x.dtype, "batchnorm_eval_forward", [&]<typename T>(T) {
    normalize(ctx, x.ptr<T>(), f32(gamma), f32(beta), f32(mean), f32(var), rows, x.dim(-1), eps, relu,
              residual_of<T>(residual), y.ptr<T>());
  });
}

namespace {

// dy where the fused ReLU let the output through, else +0; dy itself without a ReLU, whose y is
// then never read (a pass less over memory). A mask, not a branch or a conditional load, so
// that the loops around it vectorise.
template <bool Relu, typename T>
inline float relu_gate(const T* y, int64_t i, T dy) {
  if constexpr (!Relu) {
    return load(dy);
  } else {
    const uint32_t keep = 0u - uint32_t(load(y[i]) > 0.0f);
    return f32_from_bits(f32_bits(load(dy)) & keep);
  }
}

// s[c] = Σ g, s[C + c] = Σ g·(x - mean), g = dy where the fused ReLU let the output through.
template <bool Relu, typename T>
void backward_sums(const T* x, const T* y, const T* dy, const float* mean, int64_t rows, int64_t C, double* s) {
  channel_sums<2>(rows, C, [&](int64_t r, auto n, float* acc) {
    const T *xr = x + r * C, *yr = y + r * C, *dyr = dy + r * C;
    float *sum_g = acc, *sum_gx = acc + C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      float g = 0.0f, gx = 0.0f;
      for (int64_t i = 0; i < decltype(n)::value; ++i) {
        const float gi = relu_gate<Relu>(yr, i * C + c, dyr[i * C + c]);
        g += gi;
        gx += gi * (load(xr[i * C + c]) - mean[c]);
      }
      sum_g[c] += g;
      sum_gx[c] += gx;
    }
  }, s);
}

// dgamma, dbeta += this batch's sums `local`; dx = k·(g - u - (x - mean)·v) per channel with u, v
// from the sums over the `total_rows` rows of every rank (`global`), zero in eval mode.
template <bool Relu, typename T>
void backward_from_sums(Context& ctx, const T* x, const T* y, const T* dy, const float* gamma, const float* mean,
                        const float* var, float eps, bool training, int64_t rows, int64_t C, const double* local,
                        const double* global, int64_t total_rows, T* dx, float* dgamma, float* dbeta) {
  Tensor coefficients = ctx.scratch_tensor({3, C}, DType::f32);
  float *k = coefficients.ptr<float>(), *u = k + C, *v = u + C;
  for (int64_t c = 0; c < C; ++c) {
    const double rstd = 1.0 / std::sqrt(double(var[c]) + eps);
    dbeta[c] += float(local[c]);
    dgamma[c] += float(local[C + c] * rstd);
    k[c] = float(gamma[c] * rstd);
    u[c] = training ? float(global[c] / double(total_rows)) : 0.0f;
    v[c] = training ? float(global[C + c] * rstd * rstd / double(total_rows)) : 0.0f;
  }
#pragma omp parallel for schedule(static) if (rows * C > 16384)
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = r * C + c;
      dx[i] = cpu::store<T>(k[c] * (relu_gate<Relu>(y, i, dy[i]) - u[c] - (load(x[i]) - mean[c]) * v[c]));
    }
  }
}

}  // namespace

void batchnorm_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps,
                        bool relu, bool training, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batchnorm_backward";
  const OpScope scope = expect_cpu(ctx, op, {&x, &y, &dy, &gamma, &mean, &var, &dx, &dgamma, &dbeta});
  const int64_t rows = rows_of(x), C = x.dim(-1);
  const ScratchScope own_scratch(ctx);
  Tensor sums = ctx.scratch_tensor({2 * C}, DType::f64);
  double* const s = sums.ptr<double>();
  cpu::dispatch_float(x.dtype, op, [&]<typename T>(T) {
    with_flag(relu, [&](auto r) {
      constexpr bool Relu = decltype(r)::value;
      backward_sums<Relu>(x.ptr<T>(), y.ptr<T>(), dy.ptr<T>(), f32(mean), rows, C, s);
      backward_from_sums<Relu>(ctx, x.ptr<T>(), y.ptr<T>(), dy.ptr<T>(), f32(gamma), f32(mean), f32(var), eps, training,
                               rows, C, s, s, rows, dx.ptr<T>(), dgamma.ptr<float>(),
                               dbeta.ptr<float>());
    });
  });
}

void batchnorm_backward_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& mean,
                             bool relu, Tensor& sums) {
  const char* op = "batchnorm_backward_sums";
  const OpScope scope = expect_cpu(ctx, op, {&x, &y, &dy, &mean, &sums});
  const int64_t rows = rows_of(x), C = x.dim(-1);
  cpu::dispatch_float(x.dtype, op, [&]<typename T>(T) {
    with_flag(relu, [&](auto r) {
      constexpr bool Relu = decltype(r)::value;
      backward_sums<Relu>(x.ptr<T>(), y.ptr<T>(), dy.ptr<T>(), f32(mean), rows, C, sums.ptr<double>());
    });
  });
}

void batchnorm_backward_from_sums(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                                  const Tensor& gamma, const Tensor& mean, const Tensor& var, float eps, bool relu,
                                  const Tensor& local_sums, const Tensor& global_sums, int64_t total_rows, Tensor& dx,
                                  Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batchnorm_backward_from_sums";
  const OpScope scope =
      expect_cpu(ctx, op, {&x, &y, &dy, &gamma, &mean, &var, &local_sums, &global_sums, &dx, &dgamma, &dbeta});
  const int64_t rows = rows_of(x), C = x.dim(-1);
  const ScratchScope own_scratch(ctx);
  cpu::dispatch_float(x.dtype, op, [&]<typename T>(T) {
    with_flag(relu, [&](auto r) {
      constexpr bool Relu = decltype(r)::value;
      backward_from_sums<Relu>(ctx, x.ptr<T>(), y.ptr<T>(), dy.ptr<T>(), f32(gamma), f32(mean), f32(var), eps, true,
                               rows, C, local_sums.ptr<double>(), global_sums.ptr<double>(), total_rows, dx.ptr<T>(),
                               dgamma.ptr<float>(), dbeta.ptr<float>());
    });
  });
}

void batchnorm_update_running(Context& ctx, const Tensor& mean, const Tensor& var, int64_t rows,
                              float momentum, Tensor& running_mean, Tensor& running_var,
                              Tensor& num_batches_tracked) {
  const char* op = "batchnorm_update_running";
  const OpScope scope = expect_cpu(ctx, op, {&mean, &var, &running_mean, &running_var, &num_batches_tracked});
  const int64_t C = mean.numel();
  const float unbias = float(double(rows) / double(rows - 1));
  const float *m = mean.ptr<float>(), *v = var.ptr<float>();
  float *rm = running_mean.ptr<float>(), *rv = running_var.ptr<float>();
  for (int64_t c = 0; c < C; ++c) {
    rm[c] = bn_running_average(rm[c], m[c], momentum);
    rv[c] = bn_running_average(rv[c], v[c] * unbias, momentum);
  }
  num_batches_tracked.ptr<float>()[0] += 1.0f;
}

}  // namespace kiln::ops::cpu
