// train/data_parallel.h — data parallelism for the training loop (Megatron's DDP; its gradient
// buckets are train/grad_buckets.h): which micro-batches of the global batch a rank runs, and
// what its ranks share.
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
#include <vector>

#include "kiln/dist/communicator.h"
#include "kiln/nn/params.h"
#include "kiln/optim/optimizer.h"

namespace kiln::train {

// Compares a hash of the weights across `group` (with `tp_replicas_only`, of the parameters that
// tensor-parallel ranks replicate: ParamSpec::part_dim < 0): a line saying they are bitwise
// identical, or throws kiln::Error naming the rank whose weights differ.
std::string check_replicas(dist::Communicator& group, const ParamStore& store, bool tp_replicas_only);

// Made once per run (train/run_setup.h); the loop runs it.
class DataParallel {
 public:
  // Throws kiln::Error when the global batch does not split into micro-batches on every rank.
  // `distributed_optimizer`: --use-distributed-optimizer, which shards the optimizer over more than one rank.
  DataParallel(dist::Communicator& comm, int64_t global_batch, int64_t micro_batch,
               bool distributed_optimizer = false);

  dist::Communicator& comm() const { return comm_; }
  int ranks() const { return comm_.size(); }
  int rank() const { return comm_.rank(); }
  int64_t micro_batches_per_rank() const { return slots_ / comm_.size(); }
  int64_t slots() const { return slots_; }  // micro-batches per global batch, over all ranks
  int64_t global_batch() const { return global_batch_; }
  int64_t micro_batch() const { return micro_batch_; }
  // The global slot of this rank's `micro`-th micro-batch.
  int64_t slot(int64_t micro) const { return micro * comm_.size() + comm_.rank(); }

  // All ranks start from rank 0's weights (as Megatron's DDP does at construction).
  void broadcast_weights(ParamStore& store);
  // grads = sum over ranks of grads (in rank order: bitwise the same on every rank).
  void reduce_gradients(ParamStore& store);
  // values = sum over ranks of values.
  void reduce(std::span<double> values);
  // ZeRO-1 (--use-distributed-optimizer): the optimizer of rank r updates shard r of the store's
  // padded flat buffers (ParamStore::set_padding(shard_padding())) and holds its state for it only.
  bool sharded() const { return sharded_; }  // the distributed optimizer over more than one rank
  int64_t shard_padding() const { return 16 * int64_t(comm_.size()); }
  optim::ShardRange shard(const ParamStore& store) const;
  // Instead of reduce_gradients: this rank's shard of grads = the sum over ranks of that shard;
  // the rest of grads zero, so that norms over the store count each element on one rank.
  void reduce_scatter_gradients(ParamStore& store, Context& ctx);
  // values = every rank's updated shard; the compute copy refreshed from them.
  void gather_weights(ParamStore& store);
  // The partial sums of squares of a trust-ratio optimizer (Optimizer::set_norm_reduction)
  // summed over the ranks' shards: whole-parameter norms.
  void sum_norms(Tensor& norms);
  // Sharded optimizer state as whole-store buffers (for checkpoints), and back into the shards.
  // `whole` is on the host: each rank copies its shard into its own place there, then the host
  // buffers are gathered in place (no device transport sees a host buffer).
  void gather_state(Context& ctx, const ParamStore& store, const std::vector<optim::NamedState>& state,
                    std::vector<Tensor>& whole);
  void scatter_state(Context& ctx, const ParamStore& store, const std::vector<Tensor>& whole,
                     const std::vector<optim::NamedState>& state);

  // All ranks wait here (e.g. until rank 0 has written a checkpoint).
  void barrier() { comm_.barrier(); }
  // Compares a hash of the weights across ranks: "replicated parameters bitwise identical on 2
  // ranks (crc32c ...)", or throws kiln::Error naming the ranks whose weights differ.
  std::string check_replicas(const ParamStore& store) { return train::check_replicas(comm_, store, false); }

 private:
  dist::Communicator& comm_;
  int64_t global_batch_, micro_batch_, slots_;
  bool sharded_;
};

}  // namespace kiln::train
