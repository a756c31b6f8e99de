// train::check_replicas: the hash comparison that ends every data- and tensor-parallel run.
#include <gtest/gtest.h>

#include <string>

#include "kiln/train/data_parallel.h"
#include "tests/testing/error_of.h"
#include "tests/testing/fake_communicator.h"

namespace kiln::train {
namespace {

// Rank 0 of two; rank 1's hash is `other`. Remembers the hash this rank sent.
class TwoRanks final : public testing::FakeCommunicator {
 public:
  TwoRanks() : FakeCommunicator(2) {}
  int64_t other = 0, sent = 0;
  void all_gather(const Tensor& in, Tensor& out) override {
    sent = in.ptr<int64_t>()[0];
    out.ptr<int64_t>()[0] = sent;
    out.ptr<int64_t>()[1] = other;
  }
};

// A replicated LayerNorm weight and rank `tp_rank`'s half of a split matrix.
void fill_store(ParamStore& store, int tp_rank, float norm_value) {
  const Param norm = store.add("norm.weight", {4}, false);
  const Param part = store.add_part("dense.weight", {4, 2}, true, 0, 2 * tp_rank, 2);
  store.allocate();
  for (int i = 0; i < 4; ++i) norm.w()[i] = norm_value;
  for (int i = 0; i < 4; ++i) part.w()[i] = float(10 * tp_rank + i);
}

int64_t hash_of(const ParamStore& store, bool tp_replicas_only) {
  TwoRanks comm;
  (void)testing::error_of([&] { check_replicas(comm, store, tp_replicas_only); });
  return comm.sent;
}

TEST(CheckReplicas, TensorParallelRanksCompareOnlyWhatTheyReplicate) {
  ParamStore rank0, rank1, rank1_drifted;
  fill_store(rank0, 0, 1.0f);
  fill_store(rank1, 1, 1.0f);
  fill_store(rank1_drifted, 1, 1.0f + 1e-7f);
  TwoRanks comm;
  comm.other = hash_of(rank1, true);
  EXPECT_NE(check_replicas(comm, rank0, true).find("parameters that tensor-parallel ranks replicate bitwise "
                                                   "identical on 2 ranks"),
            std::string::npos);
  comm.other = hash_of(rank1_drifted, true);
  EXPECT_NE(testing::error_of([&] { check_replicas(comm, rank0, true); })
                .find("parameters that tensor-parallel ranks replicate differ across ranks: rank 0 crc32c"),
            std::string::npos);
  // Data-parallel replicas hold the same parts too: there the parts count.
  comm.other = hash_of(rank1, false);
  EXPECT_NE(testing::error_of([&] { check_replicas(comm, rank0, false); }).find("rank 1 crc32c"), std::string::npos);
}

}  // namespace
}  // namespace kiln::train
