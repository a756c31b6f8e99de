// The 1F1B orders of train/pipeline_schedule.h without any process: which forward / backward each
// stage runs when, its warm-up count, the micro-batches in flight, that the stages' orders, run
// against each other with blocking receives, complete (no stage waits forever), and, for the
// interleaved order, that each pair of ranks sends and receives its messages in the same order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/core/error.h"

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

// Megatron's interleaved order for 2 ranks of 2 chunks, 2 micro-batches ({kind, micro, chunk}):
// rank 0 warms up with all four forwards, rank 1 with two.
TEST(PipelineSchedule, InterleavedTwoRanksTwoChunks) {
  using Ops = std::vector<PipelineOp>;
  EXPECT_EQ(interleaved_one_f_one_b(2, 0, 2, 2),
            (Ops{{F, 0, 0}, {F, 1, 0}, {F, 0, 1}, {F, 1, 1}, {B, 0, 1}, {B, 1, 1}, {B, 0, 0}, {B, 1, 0}}));
  EXPECT_EQ(interleaved_one_f_one_b(2, 1, 2, 2),
            (Ops{{F, 0, 0}, {F, 1, 0}, {F, 0, 1}, {B, 0, 1}, {F, 1, 1}, {B, 1, 1}, {B, 0, 0}, {B, 1, 0}}));
  // 4 micro-batches: the second group of two starts after the first went through both chunks.
  EXPECT_EQ(interleaved_one_f_one_b(2, 1, 2, 4),
            (Ops{{F, 0, 0}, {F, 1, 0}, {F, 0, 1}, {B, 0, 1}, {F, 1, 1}, {B, 1, 1}, {F, 2, 0}, {B, 0, 0},
                 {F, 3, 0}, {B, 1, 0}, {F, 2, 1}, {B, 2, 1}, {F, 3, 1}, {B, 3, 1}, {B, 2, 0}, {B, 3, 0}}));
}

TEST(PipelineSchedule, InterleavedWithOneChunkIsOneFOneBAndNeedsWholeGroupsOfMicroBatches) {
  EXPECT_EQ(interleaved_one_f_one_b(3, 1, 1, 5), one_f_one_b(3, 1, 5));
  EXPECT_THROW(interleaved_one_f_one_b(3, 0, 2, 4), Error);
  EXPECT_EQ(micro_batches_in_flight(one_f_one_b(4, 1, 8)), 3);
}

// Paired: warm-up forwards alone, then forward + backward pairs, then the cooldown's backwards
// alone. Unpaired: every op alone.
TEST(PipelineSchedule, ExchangeUnitsPairTheSteadyStateOnly) {
  using Units = std::vector<std::pair<size_t, size_t>>;
  const auto units = [](const std::vector<PipelineOp>& ops, bool paired) {
    Units u;
    for (const ExchangeUnit& e : exchange_units(ops, paired)) u.push_back({e.begin, e.ops});
    return u;
  };
  EXPECT_EQ(units(one_f_one_b(2, 0, 4), true), (Units{{0, 1}, {1, 2}, {3, 2}, {5, 2}, {7, 1}}));
  EXPECT_EQ(units(one_f_one_b(2, 1, 2), true), (Units{{0, 2}, {2, 2}}));
  EXPECT_EQ(units(interleaved_one_f_one_b(2, 0, 2, 2), true),  // all forwards first
            (Units{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}}));
  EXPECT_EQ(units(one_f_one_b(2, 1, 2), false), (Units{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
}

// Each chunk's micro-batches forward in order, then backward in order, each once, so a chunk's
// micro-batches in flight are consecutive (slot = micro mod slots holds them apart).
TEST(PipelineSchedule, InterleavedRunsEachMicroBatchOfEachChunkOnceForwardThenBackward) {
  for (int P : {2, 3, 4})
    for (int V : {2, 3})
      for (int64_t m : {int64_t(P), int64_t(2 * P), int64_t(3 * P)})
        for (int s = 0; s < P; ++s) {
          const std::vector<PipelineOp> ops = interleaved_one_f_one_b(P, s, V, m);
          ASSERT_EQ(ops.size(), size_t(2 * m * V));
          std::vector<int64_t> forwards(size_t(V), 0), backwards(size_t(V), 0);
          int64_t most = 0;
          for (const PipelineOp& op : ops) {
            const size_t c = size_t(op.chunk);
            if (op.kind == F) EXPECT_EQ(op.micro, forwards[c]++);
            else EXPECT_EQ(op.micro, backwards[c]++);
            EXPECT_LE(backwards[c], forwards[c]);
            most = std::max(most, forwards[c] - backwards[c]);
          }
          EXPECT_EQ(most, micro_batches_in_flight(ops));
          for (int c = 0; c < V; ++c) EXPECT_EQ(backwards[size_t(c)], m);
        }
}

// Virtual stage v = chunk x P + rank; a forward needs virtual stage v - 1's forward of its
// micro-batch, a backward stage v + 1's backward.
struct Virtual {
  int P, V;
  int stage(int rank, int chunk) const { return chunk * P + rank; }
};

std::vector<std::vector<PipelineOp>> interleaved_orders(int P, int V, int64_t m) {
  std::vector<std::vector<PipelineOp>> orders;
  for (int s = 0; s < P; ++s) orders.push_back(interleaved_one_f_one_b(P, s, V, m));
  return orders;
}

TEST(PipelineSchedule, InterleavedRanksRunAgainstEachOtherToTheEnd) {
  for (int P : {2, 3, 4})
    for (int V : {2, 3})
      for (int64_t m : {int64_t(P), int64_t(2 * P)}) {
        const Virtual vs{P, V};
        const auto orders = interleaved_orders(P, V, m);
        std::set<std::tuple<bool, int, int64_t>> done;  // (forward, virtual stage, micro)
        std::vector<size_t> next(size_t(P), 0);
        for (bool progress = true; progress;) {
          progress = false;
          for (int s = 0; s < P; ++s) {
            if (next[size_t(s)] == orders[size_t(s)].size()) continue;
            const PipelineOp op = orders[size_t(s)][next[size_t(s)]];
            const int v = vs.stage(s, op.chunk);
            const bool ready = op.kind == F ? v == 0 || done.count({true, v - 1, op.micro})
                                            : v == P * V - 1 || done.count({false, v + 1, op.micro});
            if (!ready) continue;
            done.insert({op.kind == F, v, op.micro});
            ++next[size_t(s)];
            progress = true;
          }
        }
        for (int s = 0; s < P; ++s)
          EXPECT_EQ(next[size_t(s)], orders[size_t(s)].size()) << P << " ranks, " << V << " chunks, " << m;
      }
}

// Messages between two ranks arrive in the order they were sent, whatever they carry: for every
// ordered pair of ranks, the sender's sequence of (kind, micro-batch, receiving virtual stage)
// must be the receiver's.
TEST(PipelineSchedule, InterleavedRanksSendAndReceiveEachPairsMessagesInOneOrder) {
  for (int P : {2, 3, 4})
    for (int V : {2, 3})
      for (int64_t m : {int64_t(P), int64_t(2 * P), int64_t(3 * P)}) {
        const Virtual vs{P, V};
        using Message = std::tuple<bool, int64_t, int>;
        std::map<std::pair<int, int>, std::vector<Message>> sent, received;
        const auto orders = interleaved_orders(P, V, m);
        for (int s = 0; s < P; ++s)
          for (const PipelineOp& op : orders[size_t(s)]) {
            const int v = vs.stage(s, op.chunk), to = op.kind == F ? v + 1 : v - 1, from = op.kind == F ? v - 1 : v + 1;
            if (to >= 0 && to < P * V) sent[{s, to % P}].push_back({op.kind == F, op.micro, to});
            if (from >= 0 && from < P * V) received[{from % P, s}].push_back({op.kind == F, op.micro, v});
          }
        EXPECT_EQ(sent, received) << P << " ranks, " << V << " chunks, " << m << " micro-batches";
      }
}

}  // namespace
}  // namespace kiln::train
