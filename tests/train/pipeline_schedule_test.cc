// The 1F1B order of train/pipeline_schedule.h without any process: which forward / backward each
// stage runs when, its warm-up count, the micro-batches in flight, and that the stages' orders,
// run against each other with blocking receives, complete (no stage waits forever).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kiln/train/pipeline_schedule.h"

namespace kiln::train {
namespace {

constexpr auto F = PipelineOp::forward;
constexpr auto B = PipelineOp::backward;

TEST(PipelineSchedule, TwoStagesFourMicroBatches) {
  using Ops = std::vector<PipelineOp>;
  EXPECT_EQ(one_f_one_b(2, 0, 4), (Ops{{F, 0}, {F, 1}, {B, 0}, {F, 2}, {B, 1}, {F, 3}, {B, 2}, {B, 3}}));
  EXPECT_EQ(one_f_one_b(2, 1, 4), (Ops{{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2}, {B, 2}, {F, 3}, {B, 3}}));
}

TEST(PipelineSchedule, WarmupIsCappedByTheMicroBatches) {
  EXPECT_EQ(warmup_forwards(4, 0, 8), 3);
  EXPECT_EQ(warmup_forwards(4, 2, 8), 1);
  EXPECT_EQ(warmup_forwards(4, 3, 8), 0);
  EXPECT_EQ(warmup_forwards(4, 0, 2), 2);
  EXPECT_EQ(one_f_one_b(4, 0, 2), (std::vector<PipelineOp>{{F, 0}, {F, 1}, {B, 0}, {B, 1}}));
  EXPECT_EQ(one_f_one_b(1, 0, 2), (std::vector<PipelineOp>{{F, 0}, {B, 0}, {F, 1}, {B, 1}}));
}

TEST(PipelineSchedule, EachMicroBatchOnceForwardThenBackwardWithAtMostStagesLeftInFlight) {
  for (int stages : {1, 2, 3, 4})
    for (int stage = 0; stage < stages; ++stage)
      for (int64_t m : {1, 2, 3, 4, 7}) {
        const std::vector<PipelineOp> ops = one_f_one_b(stages, stage, m);
        ASSERT_EQ(ops.size(), size_t(2 * m));
        int64_t forwards = 0, backwards = 0, most = 0;
        for (const PipelineOp& op : ops) {
          if (op.kind == F) EXPECT_EQ(op.micro, forwards++);
          else EXPECT_EQ(op.micro, backwards++);
          EXPECT_LE(backwards, forwards);
          most = std::max(most, forwards - backwards);
        }
        EXPECT_EQ(most, std::min<int64_t>(stages - stage, m)) << stages << " stages, stage " << stage << ", " << m;
        // The warm-up forwards come first, then one forward / one backward.
        for (int64_t k = 0; k < warmup_forwards(stages, stage, m); ++k) EXPECT_EQ(ops[size_t(k)].kind, F);
      }
}

// Runs every stage's order: a forward of micro-batch m waits for the previous stage's forward of
// m, a backward for the next stage's backward of m (sends never block). All finish.
TEST(PipelineSchedule, StagesRunAgainstEachOtherToTheEnd) {
  for (int stages : {2, 3, 4})
    for (int64_t m : {1, 3, 6}) {
      std::vector<std::vector<PipelineOp>> orders;
      for (int s = 0; s < stages; ++s) orders.push_back(one_f_one_b(stages, s, m));
      std::vector<size_t> next(size_t(stages), 0);
      std::vector<int64_t> forwarded(size_t(stages), 0), backwarded(size_t(stages), 0);
      for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < stages; ++s) {
          if (next[size_t(s)] == orders[size_t(s)].size()) continue;
          const PipelineOp op = orders[size_t(s)][next[size_t(s)]];
          const bool ready = op.kind == F ? s == 0 || forwarded[size_t(s - 1)] > op.micro
                                          : s == stages - 1 || backwarded[size_t(s + 1)] > op.micro;
          if (!ready) continue;
          ++(op.kind == F ? forwarded : backwarded)[size_t(s)];
          ++next[size_t(s)];
          progress = true;
        }
      }
      for (int s = 0; s < stages; ++s) EXPECT_EQ(backwarded[size_t(s)], m) << stages << " stages, stage " << s;
    }
}

}  // namespace
}  // namespace kiln::train
