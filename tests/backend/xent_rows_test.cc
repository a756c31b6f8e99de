// The cross-entropy ops give a row the same bits wherever it lies in memory: the logits and the
// gradient at every offset of a 64-byte line, in f32 and bf16 (backend/cpu/xent_rows.h says why:
// a data-parallel rank holds other rows before a given one than a single process does).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kiln/backend/backend.h"
#include "tests/backend/random_fill.h"

namespace kiln::ops {
namespace {

constexpr int64_t V = 1000;  // ResNet's classes: not a multiple of any vector width
constexpr int64_t kOffsets = 32;

struct RowResult {
  std::vector<std::byte> lse, totals, dlogits, sumexp, vocab_dlogits;
};

std::vector<std::byte> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const std::byte*>(t.data);
  return {p, p + t.nbytes()};
}

// Forward and backward of one row placed `offset` elements into its buffers.
RowResult run_row(const Tensor& row, int64_t offset, int32_t label) {
  Context& ctx = cpu_context();
  const size_t esize = dtype_size(row.dtype);
  std::vector<std::byte> in((V + kOffsets) * esize), out((V + kOffsets) * esize);
  std::memcpy(in.data() + offset * esize, row.data, row.nbytes());
  const Tensor logits = Tensor::view(in.data() + offset * esize, {1, V}, row.dtype);
  Tensor dlogits = Tensor::view(out.data() + offset * esize, {1, V}, row.dtype);
  const Tensor labels = Tensor::view(&label, {1}, DType::i32);
  Tensor lse = Tensor::empty({1}, DType::f32), totals = Tensor::empty({3}, DType::i64);
  softmax_xent_forward(ctx, logits, labels, Tensor{}, 0.1f, lse, totals);
  softmax_xent_backward(ctx, logits, lse, labels, Tensor{}, 0.1f, 1.0f, totals, {0.0, 1.0}, dlogits);
  RowResult r{bytes_of(lse), bytes_of(totals), bytes_of(dlogits), {}, {}};

  float max = 0.5f;
  Tensor sumexp = Tensor::empty({1}, DType::f64);
  vocab_xent_sumexp(ctx, logits, Tensor::view(&max, {1}), sumexp);
  vocab_xent_backward(ctx, logits, lse, labels, Tensor{}, 100, 1.0f, totals, {0.0, 1.0}, dlogits);
  r.sumexp = bytes_of(sumexp);
  r.vocab_dlogits = bytes_of(dlogits);
  return r;
}

void expect_same_at_every_offset(DType dtype) {
  const std::vector<float> values = testing::random_normal(V, 41, 3.0f);
  Tensor row = Tensor::empty({1, V}, dtype);
  cast(cpu_context(), Tensor::view(const_cast<float*>(values.data()), {1, V}), row);
  const int32_t label = 357;
  const RowResult want = run_row(row, 0, label);
  for (int64_t offset = 1; offset < kOffsets; ++offset) {
    const RowResult got = run_row(row, offset, label);
    EXPECT_EQ(got.lse, want.lse) << "offset " << offset;
    EXPECT_EQ(got.totals, want.totals) << "offset " << offset;
    EXPECT_EQ(got.dlogits, want.dlogits) << "offset " << offset;
    EXPECT_EQ(got.sumexp, want.sumexp) << "offset " << offset;
    EXPECT_EQ(got.vocab_dlogits, want.vocab_dlogits) << "offset " << offset;
  }
}

TEST(XentRows, F32RowGivesTheSameBitsAtEveryOffset) { expect_same_at_every_offset(DType::f32); }

TEST(XentRows, Bf16RowGivesTheSameBitsAtEveryOffset) { expect_same_at_every_offset(DType::bf16); }

}  // namespace
}  // namespace kiln::ops
