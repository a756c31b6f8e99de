// run_pipeline_step's point-to-point calls, recorded stage by stage and replayed under the rules
// of a transport whose sends wait for their receive in stream order (NCCL): each stage runs its
// launches one after another; a send or receive completes once its counterpart is in the launch
// the peer is running; a launch (one call, or a group between group_start and group_end) ends
// when all of its calls have; a collective when every stage runs one. The 1F1B schedule must end
// on every stage for any depth and micro-batch count — and, to show the replay catches a hang,
// does not once the groups are ignored.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "kiln/train/pipeline_schedule.h"

namespace kiln::train {
namespace {

struct Call {
  bool send = false;
  int peer = 0;
};
struct Launch {
  std::vector<Call> calls;  // empty: a collective
};
using Launches = std::vector<Launch>;

class NoWait final : public dist::Request {
 public:
  void wait() override {}
};

// Records a stage's calls as launches; moves no data.
class RecordingComm final : public dist::Communicator {
 public:
  RecordingComm(int rank, int size, bool groups) : rank_(rank), size_(size), groups_(groups) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void group_start() override {
    if (groups_) open_ = &launches.emplace_back();
  }
  void group_end() override { open_ = nullptr; }
  std::unique_ptr<dist::Request> isend(const Tensor&, int peer) override { return record({true, peer}); }
  std::unique_ptr<dist::Request> irecv(Tensor&, int peer) override { return record({false, peer}); }
  void all_reduce_sum(Tensor&) override { launches.emplace_back(); }
  void broadcast(Tensor&, int) override { launches.emplace_back(); }
  void all_gather(const Tensor&, Tensor&) override { launches.emplace_back(); }
  void barrier() override { launches.emplace_back(); }
  void reduce_scatter_sum(const Tensor&, Tensor&) override { launches.emplace_back(); }
  std::unique_ptr<Communicator> split(int, int) override { throw std::logic_error("not recorded"); }

  Launches launches;

 private:
  std::unique_ptr<dist::Request> record(Call call) {
    (open_ ? *open_ : launches.emplace_back()).calls.push_back(call);
    return std::make_unique<NoWait>();
  }
  int rank_, size_;
  bool groups_;
  Launch* open_ = nullptr;
};

// `chunks` x `slots`, one small tensor each for what each op receives and returns.
class FakeStage final : public PipelineStage {
 public:
  FakeStage(int chunks, int slots) : chunks_(chunks), slots_(slots), tensors_(size_t(chunks * slots)) {
    for (Tensor& t : tensors_) t = Tensor::empty({4});
  }
  int chunks() const override { return chunks_; }
  int slots() const override { return slots_; }
  void load(int, int, const Step&) override {}
  Tensor input_buffer(int chunk, int slot, const Step&) override { return at(chunk, slot); }
  Tensor output_grad_buffer(int chunk, int slot, const Step&) override { return at(chunk, slot); }
  Tensor forward(int chunk, int slot, const Step&, const Tensor&, MicroBatchLosses*) override {
    return at(chunk, slot);
  }
  Tensor backward(int chunk, int slot, const Step&, const Tensor&, float) override { return at(chunk, slot); }
  void finish_gradients() override {}

 private:
  Tensor at(int chunk, int slot) const { return tensors_[size_t(chunk * slots_ + slot)]; }
  int chunks_, slots_;
  std::vector<Tensor> tensors_;
};

Launches record_stage(int stages, int stage, int64_t micro_batches, bool groups, int chunks = 1) {
  RecordingComm comm(stage, stages, groups);
  FakeStage fake(chunks, int(micro_batches_in_flight(interleaved_one_f_one_b(stages, stage, chunks, micro_batches))));
  PipelineReuse reuse;
  run_pipeline_step(fake, comm, micro_batches, micro_batches, 1.0f, 0, reuse, [](int64_t) { return Step{}; });
  return comm.launches;
}

// Whether every stage's launches end under the stream rules above.
bool completes(const std::vector<Launches>& stages) {
  const int P = int(stages.size());
  // Each call's counterpart: the same-numbered call of the other kind between the same two stages.
  using Channel = std::tuple<int, int, int>;  // sender, receiver, number
  std::map<std::pair<Channel, bool>, std::pair<int, size_t>> where;  // (channel, is send) -> (stage, launch)
  std::map<std::tuple<int, int, bool>, int> count;
  std::vector<std::vector<std::vector<Channel>>> channels(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s)
    for (size_t l = 0; l < stages[size_t(s)].size(); ++l) {
      channels[size_t(s)].emplace_back();
      for (const Call& c : stages[size_t(s)][l].calls) {
        const int from = c.send ? s : c.peer, to = c.send ? c.peer : s;
        const Channel ch{from, to, count[{from, to, c.send}]++};
        where[{ch, c.send}] = {s, l};
        channels[size_t(s)][l].push_back(ch);
      }
    }
  std::vector<size_t> running(static_cast<size_t>(P), 0);
  std::vector<std::vector<int>> left(static_cast<size_t>(P));  // calls of each launch not yet completed
  std::map<std::pair<Channel, bool>, bool> done;
  for (int s = 0; s < P; ++s)
    for (const Launch& l : stages[size_t(s)]) left[size_t(s)].push_back(int(l.calls.size()));
  const auto runs = [&](int s, size_t l) { return running[size_t(s)] == l; };
  for (bool progress = true; progress;) {
    progress = false;
    bool all_in_collective = true;
    for (int s = 0; s < P; ++s) {
      const size_t l = running[size_t(s)];
      all_in_collective = all_in_collective && l < stages[size_t(s)].size() && stages[size_t(s)][l].calls.empty();
    }
    if (all_in_collective) {
      for (size_t& l : running) ++l;
      progress = true;
      continue;
    }
    for (int s = 0; s < P; ++s) {
      const size_t l = running[size_t(s)];
      if (l == stages[size_t(s)].size() || stages[size_t(s)][l].calls.empty()) continue;
      for (size_t i = 0; i < channels[size_t(s)][l].size(); ++i) {
        const Channel ch = channels[size_t(s)][l][i];
        const bool send = stages[size_t(s)][l].calls[i].send;
        if (done[{ch, send}]) continue;
        const auto peer = where.find({ch, !send});
        if (peer == where.end() || !runs(peer->second.first, peer->second.second)) continue;
        done[{ch, send}] = done[{ch, !send}] = true;
        --left[size_t(s)][l];
        --left[size_t(peer->second.first)][peer->second.second];
        progress = true;
      }
    }
    for (int s = 0; s < P; ++s) {
      const size_t l = running[size_t(s)];
      if (l < stages[size_t(s)].size() && !stages[size_t(s)][l].calls.empty() && left[size_t(s)][l] == 0) {
        ++running[size_t(s)];
        progress = true;
      }
    }
  }
  for (int s = 0; s < P; ++s)
    if (running[size_t(s)] != stages[size_t(s)].size()) return false;
  return true;
}

std::vector<Launches> record_pipeline(int stages, int64_t micro_batches, bool groups, int chunks = 1) {
  std::vector<Launches> all;
  for (int s = 0; s < stages; ++s) all.push_back(record_stage(stages, s, micro_batches, groups, chunks));
  return all;
}

TEST(PipelineStreams, EveryStageEndsWhenSendsWaitForTheirReceiveInStreamOrder) {
  for (int stages : {2, 3, 4, 5})
    for (int64_t m : {1, 2, 3, 4, 7, 12})
      EXPECT_TRUE(completes(record_pipeline(stages, m, true))) << stages << " stages, " << m << " micro-batches";
}

// The interleaved schedule: activations go round the ring of ranks once per chunk.
TEST(PipelineStreams, EveryInterleavedStageEndsWhenSendsWaitForTheirReceiveInStreamOrder) {
  for (int stages : {2, 3, 4, 5})
    for (int chunks : {2, 3})
      for (int64_t groups_of_stages : {1, 2, 3})
        EXPECT_TRUE(completes(record_pipeline(stages, groups_of_stages * stages, true, chunks)))
            << stages << " stages, " << chunks << " chunks, " << groups_of_stages * stages << " micro-batches";
}

// Each call issued alone: stage 0's second activation waits for a receive that stage 1 queues
// behind its first gradient, which waits for stage 0's receive.
TEST(PipelineStreams, WithoutTheGroupsTwoStagesHang) {
  EXPECT_FALSE(completes(record_pipeline(2, 2, false)));
  EXPECT_TRUE(completes(record_pipeline(2, 1, false))) << "one micro-batch has nothing to cross";
}

}  // namespace
}  // namespace kiln::train
