// train/grad_buckets.h — data-parallel gradients reduced in buckets while backward runs
// (Megatron's DDP with --overlap-grad-reduce and --ddp-bucket-size).
//
// The flat gradient buffer is cut at parameter boundaries into buckets of at least
// `bucket_elements` (a larger parameter is a bucket of its own), from the end of the buffer:
// models register parameters in forward order, so backward completes them from the end. During
// the last micro-batch's backward the model says which gradients are final
// (Step::grads_final_from); every bucket lying wholly above that offset starts its all-reduce at
// once (Communicator::iall_reduce_sum), on the communicator's own thread where it has one.
// finish() starts the rest and waits for all. Each element is summed in rank order, as one
// all-reduce of the whole buffer would sum it, so the buckets change no bit of the result.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/core/step.h"
#include "kiln/dist/communicator.h"
#include "kiln/nn/params.h"

namespace kiln::train {

// Megatron's bucket size with --overlap-grad-reduce: max(40M, 1M x DP) elements.
int64_t default_bucket_elements(int data_parallel_size);

class GradBuckets final : public GradientWatch {
 public:
  // `store` allocated; buckets of at least `bucket_elements` (> 0) of its gradients.
  GradBuckets(dist::Communicator& comm, ParamStore& store, int64_t bucket_elements);

  struct Range {
    int64_t begin = 0, end = 0;  // elements of the flat gradient buffer
  };
  // From the end of the buffer to its start.
  const std::vector<Range>& buckets() const { return buckets_; }
  // Buckets started in the current step so far.
  size_t started() const { return started_; }

  void final_from(int64_t offset) override;
  // grads = the sum over ranks: starts the buckets not started yet, waits for every bucket, and
  // readies the buckets for the next step.
  void finish();

 private:
  void start_next();

  dist::Communicator& comm_;
  ParamStore& store_;
  std::vector<Range> buckets_;
  size_t started_ = 0;
  std::vector<std::unique_ptr<dist::Request>> pending_;
};

}  // namespace kiln::train
