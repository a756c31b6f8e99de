// backend/cpu/vocab_xent.cc — the parts of a vocab-parallel softmax cross-entropy (Megatron's
// tensor-parallel MLM loss): row statistics of this rank's logits, their combination over the
// ranks, the sum of exponentials under the global row max, the totals, and the local gradient.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/cpu/xent_rows.h"
#include "kiln/backend/route.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 8192;

}  // namespace

void vocab_xent_partials(Context& ctx, const Tensor& logits, const Tensor& labels, int64_t start,
                         Tensor& partials) {
  const OpScope scope = expect_cpu(ctx, "vocab_xent_partials", {&logits, &labels, &partials});
  const int64_t N = logits.dim(0), V = logits.dim(1);
  const int32_t* y = labels.ptr<int32_t>();
  float* out = partials.ptr<float>();
  cpu::dispatch_float(logits.dtype, "vocab_xent_partials", [&]<typename T>(T) {
#pragma omp parallel for schedule(static) if (N * V > kParallelMin)
    for (int64_t i = 0; i < N; ++i) {
      const T* row = logits.ptr<T>() + i * V;
      const XentRowMax m = xent_row_max(row, V);
      const int64_t local = int64_t(y[i]) - start;
      out[3 * i] = m.max;
      out[3 * i + 1] = float(start + m.argmax);
      out[3 * i + 2] = local >= 0 && local < V ? cpu::load(row[local]) : 0.0f;
    }
  });
}

void vocab_xent_sumexp(Context& ctx, const Tensor& logits, const Tensor& max, Tensor& sumexp) {
  const OpScope scope = expect_cpu(ctx, "vocab_xent_sumexp", {&logits, &max, &sumexp});
  const int64_t N = logits.dim(0), V = logits.dim(1);
  const float* m = max.ptr<float>();
  double* s = sumexp.ptr<double>();
  cpu::dispatch_float(logits.dtype, "vocab_xent_sumexp", [&]<typename T>(T) {
#pragma omp parallel for schedule(static) if (N * V > kParallelMin)
    for (int64_t i = 0; i < N; ++i) {
      s[i] = xent_row_sums(logits.ptr<T>() + i * V, V, m[i]).exp_sum;
    }
  });
}

void vocab_xent_combine(Context& ctx, const Tensor& gathered, Tensor& combined) {
  const OpScope scope = expect_cpu(ctx, "vocab_xent_combine", {&gathered, &combined});
  const int64_t N = combined.dim(1), R = gathered.dim(0);
  const float* g = gathered.ptr<float>();
  float *max = combined.ptr<float>(), *argmax = max + N, *target = max + 2 * N;
  for (int64_t i = 0; i < N; ++i) {
    max[i] = g[3 * i];
    argmax[i] = g[3 * i + 1];
    target[i] = 0.0f;
    for (int64_t r = 0; r < R; ++r) {
      const float* row = g + (r * N + i) * 3;
      if (row[0] > max[i]) max[i] = row[0], argmax[i] = row[1];
      target[i] += row[2];
    }
  }
}

void vocab_xent_totals(Context& ctx, const Tensor& combined, const Tensor& sumexp, const Tensor& labels,
                       const Tensor& weights, Tensor& lse, Tensor& totals) {
  const char* op = "vocab_xent_totals";
  const OpScope scope = expect_cpu(ctx, op, {&combined, &sumexp, &labels, &weights, &lse, &totals});
  const int64_t N = combined.dim(1);
  const float *max = combined.ptr<float>(), *argmax = max + N, *target = max + 2 * N;
  const float* w = weights.defined() ? weights.ptr<float>() : nullptr;
  const int32_t* y = labels.ptr<int32_t>();
  const double* sums = sumexp.ptr<double>();
  float* l = lse.ptr<float>();
  double loss = 0.0, weight_sum = 0.0, hits = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    l[i] = float(double(max[i]) + std::log(sums[i]));
    if (y[i] < 0) continue;
    const double wi = w ? double(w[i]) : 1.0;
    loss += wi * (double(l[i]) - double(target[i]));
    weight_sum += wi;
    hits += double(wi > 0 && int64_t(argmax[i]) == y[i]);
  }
  double* out = reinterpret_cast<double*>(totals.data);
  out[0] = loss, out[1] = weight_sum, out[2] = hits;
}

void vocab_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                         const Tensor& labels, const Tensor& weights, int64_t start, float scale,
                         const Tensor& totals, XentNorm norm, Tensor& dlogits) {
  const OpScope scope =
      expect_cpu(ctx, "vocab_xent_backward", {&logits, &lse, &labels, &weights, &totals, &dlogits});
  const int64_t N = logits.dim(0), V = logits.dim(1);
  const int32_t* y = labels.ptr<int32_t>();
  const float* w = weights.defined() ? weights.ptr<float>() : nullptr;
  const float* l = lse.ptr<float>();
  const double divisor = norm.divisor(reinterpret_cast<const double*>(totals.data));
  cpu::dispatch_float(logits.dtype, "vocab_xent_backward", [&]<typename T>(T) {
    cpu::dispatch_float(dlogits.dtype, "vocab_xent_backward", [&]<typename D>(D) {
#pragma omp parallel for schedule(static) if (N * V > kParallelMin)
      for (int64_t i = 0; i < N; ++i) {
        const T* row = logits.ptr<T>() + i * V;
        D* drow = dlogits.ptr<D>() + i * V;
        if (y[i] < 0) {
          std::fill(drow, drow + V, cpu::store<D>(0.0f));
          continue;
        }
        xent_grad_row(row, V, l[i], xent_row_factor(w, i, scale, divisor), 0.0f, int64_t(y[i]) - start, 1.0f,
                      drow);
      }
    });
  });
}

}  // namespace kiln::ops::cpu
