// backend/optim_ops_check.cc — the argument checks of the multi-tensor norms, the step's scalars and
// the optimizer updates (backend/checks.h), made once in the dispatch for both backends.
#include <initializer_list>

#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

bool is_split(const Tensor& w) { return w.dtype == DType::u16; }

// Throws unless every segment lies inside each defined flat buffer and the buffers are f32 (u16:
// the low halves of split master weights).
void check_segments(const char* op, std::span<const TensorSegment> segments,
                    std::initializer_list<const Tensor*> flat, bool split = false) {
  for (const Tensor* t : flat) {
    if (!t->defined()) continue;
    expect_dtype(op, "flat buffer", *t, {split ? DType::u16 : DType::f32});
    for (const TensorSegment& s : segments)
      KILN_CHECK(s.offset >= 0 && s.numel >= 0 && s.offset + s.numel <= t->numel(),
                 "op {}: segment [{}, {}) outside a buffer of {} elements", op, s.offset,
                 s.offset + s.numel, t->numel());
  }
}

// The master weights w (f32, or split: u16 low halves) and their compute copy (split: the high
// halves, bf16) over the segments.
void check_master(const char* op, std::span<const TensorSegment> segments, const Tensor& w, const Tensor& w_compute) {
  check_segments(op, segments, {&w}, is_split(w));
  if (!w_compute.defined() && !is_split(w)) return;
  KILN_CHECK(w_compute.defined(), "op {}: split master weights without their high halves", op);
  if (is_split(w)) expect_dtype(op, "w_compute (the high halves)", w_compute, {DType::bf16});
  else expect_dtype(op, "w_compute", w_compute, {DType::bf16, DType::f16});
  expect_same_numel(op, w, w_compute);
}

void check_sums(const char* op, const Tensor& sums, int64_t want) {
  expect_dtype(op, "sums", sums, {DType::i64});
  KILN_CHECK(sums.numel() == want, "op {}: sums hold {} values, {} needed", op, sums.numel(), want);
}

}  // namespace

void check_args(check::segment_sum_squares, const Tensor& a, const Tensor& b,
                std::span<const TensorSegment> segments, Tensor& sums, const Tensor& a_high) {
  const char* op = "segment_sum_squares";
  check_master(op, segments, a, a_high);
  check_segments(op, segments, {&b});
  const int64_t n = int64_t(segments.size());
  check_sums(op, sums, b.defined() ? 2 * n : n);
}

void check_args(check::scale_all, Tensor& x, float factor) { expect_dtype("scale_all", "x", x,
                {DType::f32}); }

void check_args(check::scale_by_step_scalar, Tensor& x, const Tensor& scalars, StepScalar slot) {
  expect_dtype("scale_by_step_scalar", "x", x, {DType::f32});
  expect_step_scalars("scale_by_step_scalar", scalars);
}

void check_args(check::step_norm_squares, const Tensor& sums, const Tensor& owners, Tensor& scalars) {
  const char* op = "step_norm_squares";
  expect_dtype(op, "owners", owners, {DType::i32});
  check_sums(op, sums, owners.numel());
  expect_step_scalars(op, scalars);
}

void check_args(check::step_decide, Tensor& scalars) { expect_step_scalars("step_decide", scalars); }

void check_args(check::adamw_update, const AdamStep& p, const Tensor& scalars,
                std::span<const TensorSegment> segments, Tensor& w, const Tensor& g, Tensor& m, Tensor& v,
                Tensor& w_compute) {
  const char* op = "adamw_update";
  check_segments(op, segments, {&g, &m, &v});
  check_master(op, segments, w, w_compute);
  expect_step_scalars(op, scalars);
}

void check_args(check::lamb_moments, const AdamStep& p, const Tensor& scalars,
                std::span<const TensorSegment> segments, const Tensor& w, const Tensor& w_compute,
                const Tensor& g, Tensor& m, Tensor& v, Tensor& norms) {
  const char* op = "lamb_moments";
  check_segments(op, segments, {&g, &m, &v});
  check_master(op, segments, w, is_split(w) ? w_compute : Tensor{});
  check_sums(op, norms, 2 * int64_t(segments.size()));
  expect_step_scalars(op, scalars);
}

void check_args(check::lamb_update, const AdamStep& p, const Tensor& scalars,
                std::span<const TensorSegment> segments, const Tensor& norms, Tensor& w, const Tensor& m,
                const Tensor& v, Tensor& w_compute) {
  const char* op = "lamb_update";
  check_segments(op, segments, {&m, &v});
  check_sums(op, norms, 2 * int64_t(segments.size()));
  check_master(op, segments, w, w_compute);
  expect_step_scalars(op, scalars);
}

void check_args(check::lars_update, const LarsStep& p, const Tensor& scalars,
                std::span<const TensorSegment> segments, const Tensor& norms, Tensor& w, const Tensor& g,
                Tensor& momentum, Tensor& w_compute) {
  const char* op = "lars_update";
  check_segments(op, segments, {&g, &momentum});
  check_sums(op, norms, 2 * int64_t(segments.size()));
  check_master(op, segments, w, w_compute);
  expect_step_scalars(op, scalars);
}

}  // namespace kiln::ops
