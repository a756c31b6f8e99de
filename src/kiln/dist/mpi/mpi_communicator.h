// dist/mpi/mpi_communicator.h — the Communicator over an MPI communicator (the world, or a group
// split from it; compiled only when CMake finds MPI). all_reduce_sum is a reduce-scatter and an
// all-gather: the tensor is cut into size() shares, rank r receives share r of every rank
// (MPI_Alltoall), adds them in rank order and every rank gathers the summed shares
// (MPI_Allgather). Each rank sends and receives 2 (N - 1) / N of the tensor, as in a ring, with
// no root to queue at. MPI_Allreduce is not used, because MPI does not promise an order of
// addition (it may change with the message size and the number of processes).
#pragma once
// The C interface only: the C++ bindings need a library kiln does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <memory>
#include <vector>

#include "kiln/dist/async_collectives.h"
#include "kiln/dist/communicator.h"
#include "kiln/dist/watchdog.h"

namespace kiln::dist {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm);  // after MPI_Init; owns `comm` unless it is MPI_COMM_WORLD
  ~MpiCommunicator() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  void all_reduce_sum(Tensor& t) override;
  // On a thread of its own, over a communicator split from this one on first use; where MPI
  // was not started with MPI_THREAD_MULTIPLE, it runs before returning.
  std::unique_ptr<Request> iall_reduce_sum(Tensor& t) override;
  bool can_overlap() const override { return threads_ && size_ > 1; }
  void broadcast(Tensor& t, int root) override;
  void all_gather(const Tensor& in, Tensor& out) override;
  void barrier() override;
  void reduce_scatter_sum(const Tensor& in, Tensor& out) override;
  std::unique_ptr<Request> isend(const Tensor& t, int peer) override;
  std::unique_ptr<Request> irecv(Tensor& t, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  void set_timeout(double seconds) override;
  double timeout() const override { return timeout_seconds_; }

 private:
  MPI_Comm comm_;
  double timeout_seconds_ = 0;
  int rank_ = 0, size_ = 1;
  int local_rank_ = 0, local_size_ = 1;  // among the ranks sharing this machine's memory
  Watchdog watchdog_;
  // Buffers kept between calls: all_reduce_sum's input split into shares (then the summed shares
  // of every rank), the shares other ranks sent (all_reduce_sum, reduce_scatter_sum), its own sum.
  std::vector<std::byte> outgoing_, shares_, summed_;
  bool threads_ = false;  // MPI_THREAD_MULTIPLE
  std::unique_ptr<AsyncCollectives> async_;
};

}  // namespace kiln::dist
