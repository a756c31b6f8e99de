#include "kiln/train/grad_buckets.h"

#include <algorithm>

#include "kiln/core/error.h"

namespace kiln::train {

int64_t default_bucket_elements(int data_parallel_size) {
  return std::max<int64_t>(40'000'000, 1'000'000 * int64_t(data_parallel_size));
}

GradBuckets::GradBuckets(dist::Communicator& comm, ParamStore& store, int64_t bucket_elements)
    : comm_(comm), store_(store) {
  KILN_CHECK(bucket_elements > 0, "--ddp-bucket-size must be positive, got {}", bucket_elements);
  KILN_CHECK(store.allocated(), "gradient buckets: the parameter store is not allocated");
  std::vector<int64_t> starts;  // parameter offsets, ascending
  for (const ParamSpec& s : store.specs()) starts.push_back(s.offset);
  std::sort(starts.begin(), starts.end());
  int64_t end = store.padded_size();
  for (size_t i = starts.size(); i-- > 0;) {
    const bool last = i == 0;
    if (end - starts[i] >= bucket_elements || last) {
      const int64_t begin = last ? 0 : starts[i];
      if (end > begin) buckets_.push_back({begin, end});
      end = begin;
    }
  }
}

void GradBuckets::start_next() {
  const Range& r = buckets_[started_++];
  store_.settle_grads(r.begin, r.end);
  Tensor part = store_.grads.slice_rows(r.begin, r.end);
  pending_.push_back(comm_.iall_reduce_sum(part));
}

void GradBuckets::final_from(int64_t offset) {
  while (started_ < buckets_.size() && buckets_[started_].begin >= offset) start_next();
}

void GradBuckets::finish() {
  while (started_ < buckets_.size()) start_next();
  for (auto& request : pending_) request->wait();
  pending_.clear();
  started_ = 0;
}

}  // namespace kiln::train
