#include "kiln/train/data_parallel.h"

#include <fmt/format.h>

#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"
#include "kiln/log/crc32c.h"

namespace kiln::train {

DataParallel::DataParallel(dist::Communicator& comm, int64_t global_batch, int64_t micro_batch,
                           bool distributed_optimizer)
    : comm_(comm),
      global_batch_(global_batch),
      micro_batch_(micro_batch),
      slots_(global_batch / micro_batch),
      sharded_(distributed_optimizer && comm.size() > 1) {
  if (global_batch % (micro_batch * comm.size()) != 0)
    throw Error("global batch {} does not split into micro-batches of {} on {} data-parallel ranks "
                "(it must be a multiple of {})",
                global_batch, micro_batch, comm.size(), micro_batch * comm.size());
}

void DataParallel::broadcast_weights(ParamStore& store) { comm_.broadcast(store.values, 0); }

void DataParallel::reduce_gradients(ParamStore& store) { comm_.all_reduce_sum(store.grads); }

void DataParallel::reduce(std::span<double> values) { dist::all_reduce_sum(comm_, values); }

optim::ShardRange DataParallel::shard(const ParamStore& store) const {
  KILN_CHECK(store.padded_size() % shard_padding() == 0,
             "distributed optimizer: the parameter store is not padded for {} shards", comm_.size());
  const int64_t size = store.padded_size() / comm_.size();
  return {comm_.rank() * size, size};
}

void DataParallel::reduce_scatter_gradients(ParamStore& store, Context& ctx) {
  const optim::ShardRange s = shard(store);
  const int64_t end = s.begin + s.size;
  Tensor mine = store.grads.slice_rows(s.begin, end);
  comm_.reduce_scatter_sum(store.grads, mine);  // reads all of grads before writing its shard
  Tensor before = store.grads.slice_rows(0, s.begin), after = store.grads.slice_rows(end, store.padded_size());
  if (before.numel() > 0) ops::fill(ctx, before, 0.0f);
  if (after.numel() > 0) ops::fill(ctx, after, 0.0f);
}

void DataParallel::gather_weights(ParamStore& store) {
  const optim::ShardRange s = shard(store);
  if (store.split()) {  // both halves; the low ones travel as 16-bit words (bf16: the transports move bits)
    Tensor low = store.low;
    low.dtype = DType::bf16;
    comm_.all_gather(low.slice_rows(s.begin, s.begin + s.size), low);
    comm_.all_gather(store.compute.slice_rows(s.begin, s.begin + s.size), store.compute);
    return;
  }
  comm_.all_gather(store.values.slice_rows(s.begin, s.begin + s.size), store.values);
  store.refresh_compute();
}

void DataParallel::sum_norms(Tensor& norms) {
  Tensor sums = Tensor::view(norms.data, norms.shape, DType::f64, norms.device);
  comm_.all_reduce_sum(sums);
}

void DataParallel::gather_state(Context& ctx, const ParamStore& store, const std::vector<optim::NamedState>& state,
                                std::vector<Tensor>& whole) {
  const optim::ShardRange s = shard(store);
  for (size_t i = 0; i < state.size(); ++i) {
    Tensor mine = whole[i].slice_rows(s.begin, s.begin + s.size);
    ops::copy(ctx, *state[i].data, mine);
    comm_.all_gather(mine, whole[i]);
  }
}

void DataParallel::scatter_state(Context& ctx, const ParamStore& store, const std::vector<Tensor>& whole,
                                 const std::vector<optim::NamedState>& state) {
  const optim::ShardRange s = shard(store);
  for (size_t i = 0; i < state.size(); ++i) ops::copy(ctx, whole[i].slice_rows(s.begin, s.begin + s.size), *state[i].data);
}

std::string check_replicas(dist::Communicator& group, const ParamStore& store, bool tp_replicas_only) {
  const std::vector<float> values = store.values_vector();  // read back from the device where the run has one
  uint32_t crc = 0;
  if (!tp_replicas_only) crc = log::crc32c(values.data(), values.size() * sizeof(float));
  for (const ParamSpec& s : store.specs())
    if (tp_replicas_only && s.part_dim < 0) crc = log::crc32c(values.data() + s.offset, size_t(s.numel) * 4, crc);
  int64_t mine = crc;
  std::vector<int64_t> all(size_t(group.size()));
  Tensor in = Tensor::view(&mine, {1}, DType::i64);
  Tensor out = Tensor::view(all.data(), {int64_t(all.size())}, DType::i64);
  group.all_gather(in, out);
  const char* what = tp_replicas_only ? "parameters that tensor-parallel ranks replicate" : "replicated parameters";
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error("{} differ across ranks: rank 0 crc32c {:08x}, rank {} crc32c {:08x}", what, all[0], r, all[r]);
  return fmt::format("{} bitwise identical on {} ranks (crc32c {:08x})", what, all.size(), all[0]);
}

}  // namespace kiln::train
