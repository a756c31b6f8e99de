// The single-process communicator and the data-parallel slot layout (train/data_parallel.h).
#include <gtest/gtest.h>

#include <vector>

#include "kiln/dist/communicator.h"
#include "kiln/train/data_parallel.h"
#include "tests/testing/error_of.h"
#include "tests/testing/fake_communicator.h"

namespace kiln {
namespace {

TEST(Communicator, OneProcessLeavesEveryCollectiveTheIdentity) {
  dist::SingleProcess one;
  std::vector<double> values = {1.5, -2.25, 1e300};
  dist::all_reduce_sum(one, values);
  EXPECT_EQ(values, (std::vector<double>{1.5, -2.25, 1e300}));
  std::vector<int64_t> in = {7, -9}, out(2, 0);
  Tensor tin = Tensor::view(in.data(), {2}, DType::i64), tout = Tensor::view(out.data(), {2}, DType::i64);
  one.all_gather(tin, tout);
  EXPECT_EQ(out, in);
  std::vector<float> f = {0.1f, 0.2f};
  Tensor tf = Tensor::view(f.data(), {2});
  one.broadcast(tf, 0);
  EXPECT_EQ(f, (std::vector<float>{0.1f, 0.2f}));
  std::vector<float> scattered(2, 0.0f);
  Tensor ts = Tensor::view(scattered.data(), {2});
  one.reduce_scatter_sum(tf, ts);
  EXPECT_EQ(scattered, f);
  const auto group = dist::subgroup(one, {0});
  EXPECT_EQ(group->size(), 1);
  EXPECT_EQ(testing::error_of([&] { one.send(tf, 1); }), "send to rank 1: a single process has no other rank");
}

TEST(Communicator, RefusesTensorsItCannotReduce) {
  dist::SingleProcess one;
  std::vector<int32_t> v = {1, 2};
  Tensor t = Tensor::view(v.data(), {2}, DType::i32);
  EXPECT_EQ(testing::error_of([&] { one.all_reduce_sum(t); }),
            "all_reduce_sum: dtype i32 is not supported (f32, f64, i64, bf16, f16)");
  std::vector<float> f = {1, 2};
  Tensor tf = Tensor::view(f.data(), {2});
  EXPECT_EQ(testing::error_of([&] { one.broadcast(tf, 1); }), "broadcast: root 1 outside world size 1");
}

TEST(DataParallel, RanksTakeInterleavedSlotsThatCoverTheGlobalBatchOnce) {
  // Global batch 16, micro batch 2: 8 slots; 4 ranks run 2 micro-batches each (Megatron's sampler).
  std::vector<int> owner(8, -1);
  for (int r = 0; r < 4; ++r) {
    testing::FakeCommunicator comm(4, r);
    train::DataParallel dp(comm, 16, 2);
    EXPECT_EQ(dp.micro_batches_per_rank(), 2);
    EXPECT_EQ(dp.slots(), 8);
    for (int64_t m = 0; m < dp.micro_batches_per_rank(); ++m) {
      ASSERT_EQ(owner[size_t(dp.slot(m))], -1) << "slot " << dp.slot(m) << " taken twice";
      owner[size_t(dp.slot(m))] = r;
    }
  }
  EXPECT_EQ(owner, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(DataParallel, AGlobalBatchThatDoesNotSplitAcrossRanksIsOneLine) {
  testing::FakeCommunicator comm(3, 0);
  EXPECT_EQ(testing::error_of([&] { train::DataParallel(comm, 8, 2); }),
            "global batch 8 does not split into micro-batches of 2 on 3 data-parallel ranks (it must be a "
            "multiple of 6)");
}

}  // namespace
}  // namespace kiln
