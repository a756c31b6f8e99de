// dist/communicator.h — collectives over host tensors, the same for one process and for many.
// Layers, optimizers and the training loop use this interface; only dist/mpi/ includes MPI.
//
// Reductions are deterministic: every element is summed in rank order (rank 0 + rank 1 + ...),
// so the result is bitwise identical on every rank and from one run to the next, whatever the
// transport does underneath.
#pragma once
#include <span>

#include "kiln/core/tensor.h"

namespace kiln::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's index among the ranks on its machine, and how many there are.
  virtual int local_rank() const { return 0; }
  virtual int local_size() const { return 1; }
  // In place, on every rank: t = sum over ranks of t, added in rank order. t: a host f32, f64 or
  // i64 tensor of the same shape on every rank (f32 is accumulated in f64, then rounded).
  virtual void all_reduce_sum(Tensor& t) = 0;
  // In place: every rank receives root's t (same dtype and shape on every rank).
  virtual void broadcast(Tensor& t, int root) = 0;
  // out (size() x in.numel() elements) = every rank's `in`, concatenated in rank order.
  virtual void all_gather(const Tensor& in, Tensor& out) = 0;
  virtual void barrier() = 0;
  // --dist-timeout: a collective that waits longer than `seconds` for the other ranks ends the
  // process with an error naming it (0: wait forever). One process never waits.
  virtual void set_timeout(double seconds) {}
};

// One process: rank 0 of 1; every collective is the identity.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(Tensor& t) override;
  void broadcast(Tensor& t, int root) override;
  void all_gather(const Tensor& in, Tensor& out) override;
  void barrier() override {}
};

// Sums host doubles (losses, metric counts) across ranks, in rank order.
void all_reduce_sum(Communicator& comm, std::span<double> values);

// Checks that a collective's tensor is one this interface supports; throws kiln::Error.
void check_collective_tensor(const Tensor& t, const char* op);

}  // namespace kiln::dist
