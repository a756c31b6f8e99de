// A communicator for unit tests: `ranks` ranks, this one `rank`, every collective a no-op unless a
// test overrides it (to record what the code under test asks for, or to play the other ranks).
#pragma once
#include <memory>

#include "kiln/dist/communicator.h"

namespace kiln::testing {

class FakeCommunicator : public dist::Communicator {
 public:
  explicit FakeCommunicator(int ranks, int rank = 0) : ranks_(ranks), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return ranks_; }
  void all_reduce_sum(Tensor&) override {}
  void broadcast(Tensor&, int) override {}
  void all_gather(const Tensor&, Tensor&) override {}
  void barrier() override {}
  void reduce_scatter_sum(const Tensor&, Tensor&) override {}
  std::unique_ptr<dist::Request> isend(const Tensor&, int) override { return nullptr; }
  std::unique_ptr<dist::Request> irecv(Tensor&, int) override { return nullptr; }
  std::unique_ptr<dist::Communicator> split(int, int) override { return nullptr; }

 private:
  int ranks_, rank_;
};

}  // namespace kiln::testing
