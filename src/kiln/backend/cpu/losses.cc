// backend/cpu/losses.cc — softmax cross-entropy forward (log-sum-exp, loss, correct count and
// weight sum) and backward (the per-row gradient, written directly).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kiln/backend/cpu/cpu_ops.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/backend/cpu/xent_rows.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 8192;

// Throws on a label >= V (it would index out of bounds). Here rather than in the dispatch's check
// (backend/xent_check.cc): it reads the labels' values, which a replayed graph changes.
void check_labels(const char* op, const Tensor& logits, const Tensor& labels) {
  const int64_t N = logits.dim(0), V = logits.dim(1);
  const int32_t* y = labels.ptr<int32_t>();
  for (int64_t i = 0; i < N; ++i)
    KILN_CHECK(y[i] < V, "op {}: label {} at row {} is outside [0, {})", op, y[i], i, V);
}

}  // namespace

void softmax_xent_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                          const Tensor& weights, float label_smoothing, Tensor& lse,
                          Tensor& totals) {
  const OpScope scope = expect_cpu(ctx, "softmax_xent_forward", {&logits, &labels, &weights, &lse, &totals});
  check_labels("softmax_xent_forward", logits, labels);
  const int64_t N = logits.dim(0), V = logits.dim(1);
  const int32_t* y = labels.ptr<int32_t>();
  const float* w = weights.defined() ? weights.ptr<float>() : nullptr;
  float* l = lse.ptr<float>();
  // Per row: its loss term and whether it counts as correct, combined below in row order.
  Tensor rows = ctx.scratch_tensor({N, 2}, DType::i64);
  double* row_loss = reinterpret_cast<double*>(rows.data);
  int64_t* row_correct = rows.ptr<int64_t>() + N;
  const double ls = label_smoothing;

  cpu::dispatch_float(logits.dtype, "softmax_xent_forward", [&]<typename T>(T) {
#pragma omp parallel for schedule(static) if (N * V > kParallelMin)
    for (int64_t i = 0; i < N; ++i) {
      const T* row = logits.ptr<T>() + i * V;
      const XentRowMax m = xent_row_max(row, V);
      const XentRowSums r = xent_row_sums(row, V, m.max);
      l[i] = float(double(m.max) + std::log(r.exp_sum));
      row_loss[i] = 0.0;
      row_correct[i] = 0;
      if (y[i] < 0) continue;
      const double wi = w ? double(w[i]) : 1.0;
      // -Σ_v q_v log p_v with log p_v = z_v - lse.
      double term = double(l[i]) - (1.0 - ls) * double(cpu::load(row[y[i]]));
      if (ls != 0.0) term -= ls * r.sum / double(V);
      row_loss[i] = wi * term;
      row_correct[i] = wi > 0.0 && m.argmax == y[i];
    }
  });

  double loss = 0.0, weight = 0.0, correct = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    if (y[i] < 0) continue;
    loss += row_loss[i];
    weight += w ? double(w[i]) : 1.0;
    correct += double(row_correct[i]);
  }
  const double out[3] = {loss, weight, correct};
  std::memcpy(totals.data, out, sizeof(out));
}

void softmax_xent_backward(Context& ctx, const Tensor& logits, const Tensor& lse,
                           const Tensor& labels, const Tensor& weights, float label_smoothing,
                           float scale, const Tensor& totals, XentNorm norm, Tensor& dlogits) {
  const OpScope scope =
      expect_cpu(ctx, "softmax_xent_backward", {&logits, &lse, &labels, &weights, &totals, &dlogits});
  check_labels("softmax_xent_backward", logits, labels);
  const int64_t N = logits.dim(0), V = logits.dim(1);
  const int32_t* y = labels.ptr<int32_t>();
  const float* w = weights.defined() ? weights.ptr<float>() : nullptr;
  const float* l = lse.ptr<float>();
  const float smooth = label_smoothing / float(V), hit = 1.0f - label_smoothing;
  const double divisor = norm.divisor(reinterpret_cast<const double*>(totals.data));

  cpu::dispatch_float(logits.dtype, "softmax_xent_backward", [&]<typename T>(T) {
    cpu::dispatch_float(dlogits.dtype, "softmax_xent_backward", [&]<typename D>(D) {
#pragma omp parallel for schedule(static) if (N * V > kParallelMin)
      for (int64_t i = 0; i < N; ++i) {
        const T* row = logits.ptr<T>() + i * V;
        D* drow = dlogits.ptr<D>() + i * V;
        if (y[i] < 0) {
          std::fill(drow, drow + V, cpu::store<D>(0.0f));
          continue;
        }
        xent_grad_row(row, V, l[i], xent_row_factor(w, i, scale, divisor), smooth, y[i], hit, drow);
      }
    });
  });
}

}  // namespace kiln::ops::cpu
