// backend/softmax_check.cc — the argument checks of softmax and the attention probabilities
// (backend/checks.h), made once in the dispatch for both backends.
#include "kiln/backend/checks.h"
#include "kiln/backend/route.h"
#include "kiln/core/error.h"

namespace kiln::ops {
namespace {

constexpr std::initializer_list<DType> kFloat = {DType::f32, DType::bf16, DType::f16};
constexpr int64_t kMaxCols = 1 << 16;  // longest row

void check_rows(const char* op, const Tensor& t) {
  KILN_CHECK(t.rank() >= 1 && t.dim(-1) > 0 && t.dim(-1) <= kMaxCols,
             "op {}: rows of {} must have 1..{} columns", op, shape_str(t.shape), kMaxCols);
}

// scores, probs (B, heads, Sq, Sk), mask (B, Sk) i32.
void check_attention(const char* op, const Tensor& scores, const Tensor& mask, const Tensor& probs) {
  expect_same_numel(op, scores, probs);
  expect_dtype(op, "mask", mask, {DType::i32});
  KILN_CHECK(scores.rank() == 4 && mask.rank() == 2 && mask.dim(0) == scores.dim(0) &&
                 mask.dim(1) == scores.dim(3) && scores.dim(3) > 0 && scores.dim(3) <= kMaxCols,
             "op {}: scores {} (B, heads, Sq, Sk) with mask {} (B, Sk)", op, shape_str(scores.shape),
             shape_str(mask.shape));
  expect_dtype(op, "scores", scores, kFloat);
  expect_dtype(op, "probs", probs, kFloat);
}

// The dropout of the probabilities (B, heads, Sq, Sk): whole rows per sample.
void check_probs_dropout(const char* op, const Tensor& probs, const DropoutMask& drop) {
  check_rows(op, probs);
  expect_dropout_mask(op, drop, probs.numel(), probs.dim(-1));
}

}  // namespace

void check_args(check::softmax_forward, const Tensor& x, Tensor& y) {
  const char* op = "softmax_forward";
  expect_same_numel(op, x, y);
  check_rows(op, x);
  expect_dtype(op, "x", x, kFloat);
  expect_dtype(op, "y", y, kFloat);
}

void check_args(check::softmax_backward, const Tensor& y, const Tensor& dy, float scale, Tensor& dx) {
  const char* op = "softmax_backward";
  expect_same_numel(op, y, dy);
  expect_same_numel(op, y, dx);
  check_rows(op, y);
  expect_dtype(op, "y", y, kFloat);
  expect_dtype(op, "dy", dy, kFloat);
  expect_dtype(op, "dx", dx, kFloat);
}

void check_args(check::attention_softmax_forward, const Tensor& scores, const Tensor& mask, Tensor& probs) {
  check_attention("attention_softmax_forward", scores, mask, probs);
}

void check_args(check::attention_probs_forward, const Tensor& scores, const Tensor& mask,
                const DropoutMask& drop, Tensor& probs, Tensor& dropped) {
  const char* op = "attention_probs_forward";
  check_attention(op, scores, mask, probs);
  expect_like(op, probs, {&dropped});
  check_probs_dropout(op, probs, drop);
}

void check_args(check::attention_probs_backward, const Tensor& probs, Tensor& dprobs, const DropoutMask& drop,
                float scale, Tensor& dscores, Tensor& dropped) {
  const char* op = "attention_probs_backward";
  KILN_CHECK(probs.rank() == 4, "op {}: probs {} are not (B, heads, Sq, Sk)", op, shape_str(probs.shape));
  expect_like(op, probs, {&dscores, &dropped});
  expect_same_numel(op, probs, dprobs);
  check_probs_dropout(op, probs, drop);
  expect_dtype(op, "probs", probs, kFloat);
  expect_dtype(op, "dprobs", dprobs, kFloat);
}

}  // namespace kiln::ops
