// train/data_parallel.h — data parallelism for the training loop (Megatron's DDP, without
// buckets yet): which micro-batches of the global batch a rank runs, and what its ranks share.
//
// A global batch of G samples is G / m micro-batch slots of m samples. Megatron's sampler: the
// k-th micro-batch of every rank spans m x DP consecutive samples and rank r takes the r-th m of
// them, so rank r's k-th micro-batch is slot k x DP + r, the slot a single process runs as its
// (k x DP + r)-th micro-batch. Each micro-batch's gradient is scaled by 1 / (G / m) on every
// rank, so the sum over ranks (after the last micro-batch) is the single-process gradient of the
// global batch; losses and counters are summed the same way.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "kiln/dist/communicator.h"
#include "kiln/nn/params.h"

namespace kiln::train {

class DataParallel {
 public:
  // Throws kiln::Error when the global batch does not split into micro-batches on every rank.
  DataParallel(dist::Communicator& comm, int64_t global_batch, int64_t micro_batch);

  int ranks() const { return comm_.size(); }
  int rank() const { return comm_.rank(); }
  int64_t micro_batches_per_rank() const { return slots_ / comm_.size(); }
  int64_t slots() const { return slots_; }  // micro-batches per global batch, over all ranks
  // The global slot of this rank's `micro`-th micro-batch.
  int64_t slot(int64_t micro) const { return micro * comm_.size() + comm_.rank(); }

  // All ranks start from rank 0's weights (as Megatron's DDP does at construction).
  void broadcast_weights(ParamStore& store);
  // grads = sum over ranks of grads (in rank order: bitwise the same on every rank).
  void reduce_gradients(ParamStore& store);
  // values = sum over ranks of values.
  void reduce(std::span<double> values);
  // All ranks wait here (e.g. until rank 0 has written a checkpoint).
  void barrier() { comm_.barrier(); }
  // Compares a hash of the weights across ranks: "replicated parameters bitwise identical on 2
  // ranks (crc32c ...)", or throws kiln::Error naming the ranks whose weights differ.
  std::string check_replicas(const ParamStore& store);

 private:
  dist::Communicator& comm_;
  int64_t slots_;
};

}  // namespace kiln::train
