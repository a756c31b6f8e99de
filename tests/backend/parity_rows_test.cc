// Parity of the embedding row ops: gather and the deterministic scatter-add, for every float
// dtype of table and rows, over a whole table and over a part of one (a vocab-parallel rank's
// rows: ids outside it give zero rows and add nothing).
#include "kiln/core/error.h"
#include "parity.h"

namespace kiln {
namespace {

using testing::Parity;

TEST(ParityRows, GatherCopiesRowsAndConverts) {
  Parity p;
  const std::vector<int32_t> ids = {3, 0, 9, 3, 3, 5, 9};
  const Tensor id =
      p.to_device(Tensor::view(const_cast<int32_t*>(ids.data()), {7}, DType::i32));
  for (DType table_dt : testing::float_dtypes())
    for (DType out_dt : testing::float_dtypes()) {
      const Tensor table = p.random({10, 70}, table_dt, 1);
      Tensor out = p.zeros({7, 70}, out_dt);
      ops::gather_rows(p.ctx, table, id, out);
      const auto ht = p.host(table);
      std::vector<float> want;
      for (int32_t i : ids) want.insert(want.end(), ht.begin() + i * 70, ht.begin() + (i + 1) * 70);
      // Exactly the table's values, rounded once to the output dtype.
      EXPECT_EQ(p.host(out), p.host(p.from_host(want, {7, 70}, out_dt)))
          << dtype_name(table_dt) << " -> " << dtype_name(out_dt);
    }
}

TEST(ParityRows, ScatterAddSumsRepeatedIdsInOrder) {
  Parity p;
  const std::vector<int32_t> ids = {3, 0, 9, 3, 3, 5, 9};
  const Tensor id =
      p.to_device(Tensor::view(const_cast<int32_t*>(ids.data()), {7}, DType::i32));
  for (DType dy_dt : testing::float_dtypes())
    for (DType table_dt : {DType::f32, dy_dt}) {
      const Tensor dy = p.random({7, 130}, dy_dt, 2);
      Tensor dtable = p.random({10, 130}, table_dt, 3);
      std::vector<double> want = p.host(dtable);
      const auto hdy = p.host(dy);
      for (size_t i = 0; i < ids.size(); ++i)
        for (size_t c = 0; c < 130; ++c) want[size_t(ids[i]) * 130 + c] += hdy[i * 130 + c];
      ops::scatter_add_rows(p.ctx, dy, id, dtable);
      p.expect_close(dtable, want, fmt::format("scatter_add {} into {}", dtype_name(dy_dt),
                                               dtype_name(table_dt)));
    }
  // Bitwise repeatable.
  const Tensor dy = p.random({7, 130}, DType::f32, 4);
  Tensor a = p.zeros({10, 130}, DType::f32), b = p.zeros({10, 130}, DType::f32);
  ops::scatter_add_rows(p.ctx, dy, id, a);
  ops::scatter_add_rows(p.ctx, dy, id, b);
  EXPECT_EQ(p.host(a), p.host(b));
  Tensor narrow = p.zeros({10, 129}, DType::f32);
  EXPECT_THROW(ops::scatter_add_rows(p.ctx, dy, id, narrow), Error);
}

// The rows [4, 8) of a 10-row table: ids 5 and 7 are held (local rows 1 and 3), the rest not.
TEST(ParityRows, APartOfATableGathersZerosAndAddsNothingForTheIdsItDoesNotHold) {
  Parity p;
  const std::vector<int32_t> ids = {3, 5, 9, 7, 5, 0, 4};
  const Tensor id = p.to_device(Tensor::view(const_cast<int32_t*>(ids.data()), {7}, DType::i32));
  const int64_t first = 4, num = 4, dim = 70;
  for (DType dt : testing::float_dtypes()) {
    const Tensor part = p.random({num, dim}, dt, 5);
    Tensor out = p.random({7, dim}, DType::f32, 6);  // every row overwritten
    ops::gather_rows(p.ctx, part, id, out, first);
    const auto hp = p.host(part);
    std::vector<double> want;
    for (int32_t i : ids) {
      const bool held = i >= first && i < first + num;
      for (int64_t c = 0; c < dim; ++c) want.push_back(held ? hp[size_t((i - first) * dim + c)] : 0.0);
    }
    EXPECT_EQ(p.host(out), want) << dtype_name(dt);

    const Tensor dy = p.random({7, dim}, dt, 7);
    Tensor dpart = p.random({num, dim}, DType::f32, 8);
    std::vector<double> added = p.host(dpart);
    const auto hdy = p.host(dy);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= first && ids[i] < first + num)
        for (int64_t c = 0; c < dim; ++c) added[size_t((ids[i] - first) * dim + c)] += hdy[i * dim + size_t(c)];
    ops::scatter_add_rows(p.ctx, dy, id, dpart, first);
    p.expect_close(dpart, added, fmt::format("scatter_add {} into a part", dtype_name(dt)));
  }
}

}  // namespace
}  // namespace kiln
