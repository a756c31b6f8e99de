// dist/staged_communicator.h — collectives over tensors on a device, through a communicator for
// host tensors: each call copies its device tensors into host buffers, runs the host collective,
// and copies the result back; host tensors pass straight through. The same results, bit for
// bit, as the host communicator on the same values. It carries data parallelism on a device where
// no device transport (NCCL) is built, and on the simulated device under mpirun. The copies run on
// the calling thread, before a request is started and in its wait(). Each device tensor gets one
// host buffer (page-locked on a GPU), kept for the next call: the training step's collectives
// reduce the same gradient buckets every step, so the steady state allocates nothing.
#pragma once
#include <map>
#include <memory>
#include <utility>

#include "kiln/core/context.h"
#include "kiln/dist/communicator.h"

namespace kiln::dist {

class StagedCommunicator final : public Communicator {
 public:
  // Over `host` (not owned), for tensors on `device`.
  StagedCommunicator(Communicator& host, Device device);

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  int local_rank() const override { return host_.local_rank(); }
  int local_size() const override { return host_.local_size(); }
  void all_reduce_sum(Tensor& t) override;
  std::unique_ptr<Request> iall_reduce_sum(Tensor& t) override;
  bool can_overlap() const override { return host_.can_overlap(); }
  void broadcast(Tensor& t, int root) override;
  void all_gather(const Tensor& in, Tensor& out) override;
  void barrier() override { host_.barrier(); }
  void reduce_scatter_sum(const Tensor& in, Tensor& out) override;
  std::unique_ptr<Request> isend(const Tensor& t, int peer) override;
  std::unique_ptr<Request> irecv(Tensor& t, int peer) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  void set_timeout(double seconds) override { host_.set_timeout(seconds); }
  double timeout() const override { return host_.timeout(); }

 private:
  StagedCommunicator(std::unique_ptr<Communicator> owned, Device device);
  Tensor host_buffer(const Tensor& t);  // t itself on the host, else t's host buffer (contents stale)
  Tensor staged(const Tensor& t);       // t's host buffer holding t's values

  std::unique_ptr<Communicator> owned_;  // a split's own host communicator
  Communicator& host_;
  Context ctx_;
  std::map<std::pair<const void*, size_t>, Tensor> buffers_;  // by the device tensor's address and size
};

}  // namespace kiln::dist
