// backend/cpu/optim_ops.cc — multi-tensor norms, gradient scaling, the step's decisions, and the
// fused AdamW / LAMB / LARS updates over segments of the flat parameter buffers.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/adam_math.h"
#include "kiln/backend/cpu/master_halves.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/route.h"
#include "kiln/backend/step_math.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

int64_t chunks_of(int64_t n) { return (n + kSumChunk - 1) / kSumChunk; }

bool is_split(const Tensor& w) { return w.dtype == DType::u16; }

// Calls fn(read) with read(i) the master weight i, chosen outside the loops so that they vectorise.
template <typename F>
decltype(auto) with_master(const Tensor& w, const Tensor& w_compute, F&& fn) {
  if (is_split(w)) {
    const auto* high = static_cast<const uint16_t*>(w_compute.data);
    const auto* low = static_cast<const uint16_t*>(w.data);
    return fn([high, low](int64_t i) { return join_halves(high[i], low[i]); });
  }
  const float* W = w.ptr<float>();
  return fn([W](int64_t i) { return W[i]; });
}

// Calls fn(k, begin, end) for every chunk [begin, end) (offsets inside the segment) of every
// segment k; chunks run in parallel, each exactly once.
template <typename F>
void for_each_chunk(std::span<const TensorSegment> segments, F&& fn) {
  int64_t total = 0;
  for (const TensorSegment& s : segments) total += s.numel;
#pragma omp parallel if (total > kParallelMin)
  for (size_t k = 0; k < segments.size(); ++k) {
    const int64_t n = segments[k].numel, chunks = chunks_of(n);
#pragma omp for schedule(static) nowait
    for (int64_t c = 0; c < chunks; ++c) fn(k, c, c * kSumChunk, std::min(n, (c + 1) * kSumChunk));
  }
}

// Per segment, (Σ_i f(k, i).a, Σ_i f(k, i).b) over its elements in double, in backend.h's order:
// kSumLanes interleaved lane sums per chunk, then every lane of every chunk added in order. f is
// called exactly once per element, so it may update state there.
struct Pair {
  double a = 0, b = 0;
};

// The lane sums of elements [begin, end) of segment k into lanes (kSumLanes).
template <typename F>
void lane_sums(F& f, size_t k, int64_t begin, int64_t end, Pair* lanes) {
  double a[kSumLanes] = {}, b[kSumLanes] = {};
  int64_t i = begin;
  for (; i + kSumLanes <= end; i += kSumLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kSumLanes; ++l) {
      const Pair p = f(k, i + l);
      a[l] += p.a;
      b[l] += p.b;
    }
  }
  for (int64_t l = 0; i + l < end; ++l) {
    const Pair p = f(k, i + l);
    a[l] += p.a;
    b[l] += p.b;
  }
  for (int64_t l = 0; l < kSumLanes; ++l) lanes[l] = {a[l], b[l]};
}

template <typename F>
void segment_sums(Context& ctx, std::span<const TensorSegment> segments, F&& f, double* out_a,
                  double* out_b) {
  const size_t n = segments.size();
  Tensor first_t = ctx.scratch_tensor({int64_t(n) + 1}, DType::i64);
  int64_t* first = first_t.ptr<int64_t>();  // first chunk slot of each segment
  first[0] = 0;
  for (size_t k = 0; k < n; ++k) first[k + 1] = first[k] + chunks_of(segments[k].numel);
  Tensor partial_t = ctx.scratch_tensor({std::max<int64_t>(first[n], 1) * kSumLanes, 2}, DType::i64);
  Pair* partial = reinterpret_cast<Pair*>(partial_t.data);
  for_each_chunk(segments, [&](size_t k, int64_t c, int64_t begin, int64_t end) {
    lane_sums(f, k, begin, end, partial + (first[k] + c) * kSumLanes);
  });
  for (size_t k = 0; k < n; ++k) {
    Pair total;
    for (int64_t j = first[k] * kSumLanes; j < first[k + 1] * kSumLanes; ++j)
      total.a += partial[j].a, total.b += partial[j].b;
    out_a[k] = total.a;
    if (out_b) out_b[k] = total.b;
  }
}

// Writes per-segment pair sums as rows (Σa, Σb) of `sums` (n, 2).
template <typename F>
void segment_pair_sums(Context& ctx, std::span<const TensorSegment> segments, F&& f, Tensor& sums) {
  const size_t n = segments.size();
  Tensor tmp = ctx.scratch_tensor({2 * int64_t(n) + 1}, DType::i64);
  double* a = reinterpret_cast<double*>(tmp.data);
  double* b = a + n;
  segment_sums(ctx, segments, f, a, b);
  double* out = reinterpret_cast<double*>(sums.data);
  for (size_t k = 0; k < n; ++k) out[2 * k] = a[k], out[2 * k + 1] = b[k];
}

// w_i = update(i, w_i) for i in [begin, end), and each new weight rounded into the compute copy
// (T = void: none). The dtype is chosen outside the loop, so the loop vectorises.
template <typename T, typename F>
void update_weights(int64_t begin, int64_t end, float* W, T* compute, F&& update) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    W[i] = update(i, W[i]);
    if constexpr (!std::is_void_v<T>) compute[i] = cpu::store<T>(W[i]);
  }
}
template <typename F>
void update_split_weights(int64_t begin, int64_t end, uint16_t* high, uint16_t* low, F&& update) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) split_halves(update(i, join_halves(high[i], low[i])), high[i], low[i]);
}
template <typename F>
void update_weights(int64_t begin, int64_t end, const Tensor& w, const Tensor& compute, F&& update) {
  if (is_split(w))
    update_split_weights(begin, end, static_cast<uint16_t*>(compute.data), static_cast<uint16_t*>(w.data), update);
  else if (!compute.defined()) update_weights<void>(begin, end, static_cast<float*>(w.data), nullptr, update);
  else if (compute.dtype == DType::bf16)
    update_weights(begin, end, static_cast<float*>(w.data), static_cast<bf16_t*>(compute.data), update);
  else update_weights(begin, end, static_cast<float*>(w.data), static_cast<f16_t*>(compute.data), update);
}

void scale_in_place(float* p, int64_t n, float factor) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) p[i] *= factor;
}

// The step's scalars block, read (and for step_* ops written) when the op runs.
double* step_scalars(const Tensor& scalars) {
  return reinterpret_cast<double*>(const_cast<int64_t*>(scalars.ptr<int64_t>()));
}

// The Adam constants with the step's own values.
struct AdamValues {
  float lr, bc1, bc2, factor;
  explicit AdamValues(const double* s)
      : lr(float(s[kStepLr])), bc1(float(s[kStepBc1])), bc2(float(s[kStepBc2])), factor(float(s[kStepGradFactor])) {}
};

}  // namespace

void segment_sum_squares(Context& ctx, const Tensor& a, const Tensor& b,
                         std::span<const TensorSegment> segments, Tensor& sums, const Tensor& a_high) {
  const OpScope scope = expect_cpu(ctx, "segment_sum_squares", {&a, &b, &sums, &a_high});
  with_master(a, a_high, [&](auto x) {
    if (!b.defined()) {
      segment_sums(ctx, segments, [&](size_t k, int64_t i) {
        const double v = x(segments[k].offset + i);
        return Pair{v * v, 0.0};
      }, reinterpret_cast<double*>(sums.data), nullptr);
      return;
    }
    const float* y = b.ptr<float>();
    segment_pair_sums(ctx, segments, [&](size_t k, int64_t i) {
      const int64_t j = segments[k].offset + i;
      const double v = x(j);
      return Pair{v * v, double(y[j]) * double(y[j])};
    }, sums);
  });
}

void scale_all(Context& ctx, Tensor& x, float factor) {
  const OpScope scope = expect_cpu(ctx, "scale_all", {&x});
  scale_in_place(x.ptr<float>(), x.numel(), factor);
}

void scale_by_step_scalar(Context& ctx, Tensor& x, const Tensor& scalars, StepScalar slot) {
  const OpScope scope = expect_cpu(ctx, "scale_by_step_scalar", {&x, &scalars});
  const float factor = float(step_scalars(scalars)[slot]);
  if (factor != 1.0f) scale_in_place(x.ptr<float>(), x.numel(), factor);
}

void step_norm_squares(Context& ctx, const Tensor& sums, const Tensor& owners, Tensor& scalars) {
  const OpScope scope = expect_cpu(ctx, "step_norm_squares", {&sums, &owners, &scalars});
  double* s = step_scalars(scalars);
  s[kStepNormSquares] = owned_sum(reinterpret_cast<const double*>(sums.ptr<int64_t>()), owners.ptr<int32_t>(),
                                  owners.numel());
}

void step_decide(Context& ctx, Tensor& scalars) {
  const OpScope scope = expect_cpu(ctx, "step_decide", {&scalars});
  decide_step(step_scalars(scalars));
}

void adamw_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& w_compute) {
  const OpScope scope = expect_cpu(ctx, "adamw_update", {&scalars, &w, &g, &m, &v, &w_compute});
  const double* s = step_scalars(scalars);
  if (step_skipped(s)) return;
  const AdamValues a(s);
  const float* G = g.ptr<float>();
  float *M = m.ptr<float>(), *V = v.ptr<float>();
  for_each_chunk(segments, [&](size_t k, int64_t, int64_t begin, int64_t end) {
    const int64_t o = segments[k].offset;
    const float wd = segments[k].decay ? p.weight_decay : 0.0f;
    update_weights(o + begin, o + end, w, w_compute, [&](int64_t i, float wi) {
      cpu::adam_moments(a.factor * G[i], p.beta1, p.beta2, M[i], V[i]);
      return wi - a.lr * cpu::adam_direction(M[i], V[i], wi, a.bc1, a.bc2, p.eps, wd);
    });
  });
}

void lamb_moments(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  const Tensor& w, const Tensor& w_compute, const Tensor& g, Tensor& m, Tensor& v, Tensor& norms) {
  const OpScope scope = expect_cpu(ctx, "lamb_moments", {&scalars, &w, &w_compute, &g, &m, &v, &norms});
  const double* s = step_scalars(scalars);
  if (step_skipped(s)) {  // zero norms through the same scratch: its use must not depend on device data
    segment_pair_sums(ctx, segments, [](size_t, int64_t) { return Pair{}; }, norms);
    return;
  }
  const AdamValues a(s);
  const float* G = g.ptr<float>();
  float *M = m.ptr<float>(), *V = v.ptr<float>();
  with_master(w, w_compute, [&](auto W) {
    segment_pair_sums(ctx, segments, [&](size_t k, int64_t e) {
      const int64_t i = segments[k].offset + e;
      const float wd = p.weight_decay * float(segments[k].decay);  // no load under a condition: vectorises
      const float wi = W(i);
      cpu::adam_moments(a.factor * G[i], p.beta1, p.beta2, M[i], V[i]);
      const float u = cpu::adam_direction(M[i], V[i], wi, a.bc1, a.bc2, p.eps, wd);
      return Pair{double(wi) * double(wi), double(u) * double(u)};
    }, norms);
  });
}

void lamb_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& m, const Tensor& v, Tensor& w_compute) {
  const OpScope scope = expect_cpu(ctx, "lamb_update", {&scalars, &norms, &w, &m, &v, &w_compute});
  const double* s = step_scalars(scalars);
  if (step_skipped(s)) return;
  const AdamValues a(s);
  const double* sq = reinterpret_cast<const double*>(norms.data);
  const float *M = m.ptr<float>(), *V = v.ptr<float>();
  for_each_chunk(segments, [&](size_t k, int64_t, int64_t begin, int64_t end) {
    const double w_norm = std::sqrt(sq[2 * k]), u_norm = std::sqrt(sq[2 * k + 1]);
    const double ratio = (w_norm > 0.0 && u_norm > 0.0) ? w_norm / u_norm : 1.0;
    const float scale = float(double(a.lr) * ratio);
    const float wd = segments[k].decay ? p.weight_decay : 0.0f;
    const int64_t o = segments[k].offset;
    update_weights(o + begin, o + end, w, w_compute, [&](int64_t i, float wi) {
      return wi - scale * cpu::adam_direction(M[i], V[i], wi, a.bc1, a.bc2, p.eps, wd);
    });
  });
}

void lars_update(Context& ctx, const LarsStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& g, Tensor& momentum, Tensor& w_compute) {
  const OpScope scope = expect_cpu(ctx, "lars_update", {&scalars, &norms, &w, &g, &momentum, &w_compute});
  const double* s = step_scalars(scalars);
  if (step_skipped(s)) return;
  const float lr = float(s[kStepLr]);
  const double* sq = reinterpret_cast<const double*>(norms.data);
  const float* G = g.ptr<float>();
  float* Mo = momentum.ptr<float>();
  const float mom = p.momentum;
  for_each_chunk(segments, [&](size_t k, int64_t, int64_t begin, int64_t end) {
    const bool decay = segments[k].decay;
    const float wd = decay ? p.weight_decay : 0.0f;
    float scale = lr;  // lr·r
    if (decay) {
      const double w_norm = std::sqrt(sq[2 * k]), g_norm = std::sqrt(sq[2 * k + 1]);
      const double ratio = w_norm > 0.0 && g_norm > 0.0
                               ? double(p.eeta) * w_norm /
                                     (g_norm + double(wd) * w_norm + double(p.epsilon))
                               : 1.0;
      scale = float(double(lr) * ratio);
    }
    const int64_t o = segments[k].offset;
    update_weights(o + begin, o + end, w, w_compute, [&](int64_t i, float wi) {
      Mo[i] = mom * Mo[i] + scale * (G[i] + wd * wi);
      return wi - Mo[i];
    });
  });
}

}  // namespace kiln::ops::cpu
