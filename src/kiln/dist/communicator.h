// dist/communicator.h — collectives over host tensors, the same for one process and for many.
// Layers, optimizers and the training loop use this interface; only dist/mpi/ includes MPI.
//
// Reductions are deterministic: every element is summed in rank order (rank 0 + rank 1 + ...),
// so the result is bitwise identical on every rank and from one run to the next, whatever the
// transport does underneath.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::dist {

// A non-blocking send or receive in flight.
class Request {
 public:
  virtual ~Request() = default;
  // Returns when the send's tensor may be reused, or the receive's tensor holds the data.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's index among the ranks on its machine, and how many there are.
  virtual int local_rank() const { return 0; }
  virtual int local_size() const { return 1; }
  // In place, on every rank: t = sum over ranks of t, added in rank order. t: a host f32, f64,
  // i64, bf16 or f16 tensor of the same shape on every rank (floats narrower than f64 are
  // accumulated in f64, then rounded once).
  virtual void all_reduce_sum(Tensor& t) = 0;
  // all_reduce_sum(t), started and left to run while the caller goes on where the transport can
  // (can_overlap()), else run before returning. `t` stays untouched until the request's wait()
  // returns. Every rank starts the same requests in the same order; they complete in that order.
  virtual std::unique_ptr<Request> iall_reduce_sum(Tensor& t);
  virtual bool can_overlap() const { return false; }
  // Whether its collectives on device tensors can be captured in a GPU graph (backend/graph.h):
  // queued on the op stream with nothing waiting on the host.
  virtual bool can_capture() const { return false; }
  // In place: every rank receives root's t (same dtype and shape on every rank).
  virtual void broadcast(Tensor& t, int root) = 0;
  // out (size() x in.numel() elements) = every rank's `in`, concatenated in rank order. `in` may
  // be this rank's own place in `out` (in place).
  virtual void all_gather(const Tensor& in, Tensor& out) = 0;
  virtual void barrier() = 0;
  // out (n elements) = sum over ranks, in rank order, of elements [rank() x n, (rank() + 1) x n)
  // of every rank's `in` (size() x n elements). f32, f64 or i64 as all_reduce_sum. `out` may lie
  // inside `in` (all of `in` is read before `out` is written).
  virtual void reduce_scatter_sum(const Tensor& in, Tensor& out) = 0;
  // Point-to-point (pipeline stages): t's bytes to / from rank `peer` of this communicator; the
  // receiver's tensor has the sender's dtype and size. Any host dtype.
  virtual std::unique_ptr<Request> isend(const Tensor& t, int peer) = 0;
  virtual std::unique_ptr<Request> irecv(Tensor& t, int peer) = 0;
  // Point-to-point calls made between group_start() and group_end() progress together (NCCL's
  // group calls): a send and a receive of one group cannot wait for each other in a stream. No-ops
  // where sends never wait for their receive (MPI).
  virtual void group_start() {}
  virtual void group_end() {}
  void send(const Tensor& t, int peer) { isend(t, peer)->wait(); }
  void recv(Tensor& t, int peer) { irecv(t, peer)->wait(); }
  // The communicator of the ranks passing the same `color`, ordered by `key`; collective: every
  // rank of this communicator calls it. Inherits the timeout.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // --dist-timeout: a collective that waits longer than `seconds` for the other ranks ends the
  // process with an error naming it (0: wait forever). One process never waits.
  virtual void set_timeout(double seconds) {}
  virtual double timeout() const { return 0; }  // what set_timeout set (0: none)
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
  void reduce_scatter_sum(const Tensor& in, Tensor& out) override;
  std::unique_ptr<Request> isend(const Tensor& t, int peer) override;
  std::unique_ptr<Request> irecv(Tensor& t, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
};

// The sub-communicator of `members` (ranks of `comm`, ascending, this rank among them): every
// rank of `comm` calls it with its own group, the groups of one kind partitioning the ranks
// (dist/parallel_layout.h).
std::unique_ptr<Communicator> subgroup(Communicator& comm, const std::vector<int>& members);

// Sums host doubles (losses, metric counts) across ranks, in rank order.
void all_reduce_sum(Communicator& comm, std::span<double> values);
// Every rank's `text`, by rank (e.g. what each rank sees, to check that all agree).
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& text);

// Checks that a collective's tensor is one this interface supports; throws kiln::Error.
void check_collective_tensor(const Tensor& t, const char* op);
// Checks that a collective's input and output are both on a device or both on the host, as a
// device transport (NCCL) needs them; throws kiln::Error.
void check_same_side(const char* op, const Tensor& in, const Tensor& out);

}  // namespace kiln::dist
