#include "kiln/train/data_parallel.h"

#include <fmt/format.h>

#include <vector>

#include "kiln/core/error.h"
#include "kiln/log/crc32c.h"

namespace kiln::train {

DataParallel::DataParallel(dist::Communicator& comm, int64_t global_batch, int64_t micro_batch)
    : comm_(comm), slots_(global_batch / micro_batch) {
  if (global_batch % (micro_batch * comm.size()) != 0)
    throw Error("global batch {} does not split into micro-batches of {} on {} data-parallel ranks "
                "(it must be a multiple of {})",
                global_batch, micro_batch, comm.size(), micro_batch * comm.size());
}

void DataParallel::broadcast_weights(ParamStore& store) { comm_.broadcast(store.values, 0); }

void DataParallel::reduce_gradients(ParamStore& store) { comm_.all_reduce_sum(store.grads); }

void DataParallel::reduce(std::span<double> values) { dist::all_reduce_sum(comm_, values); }

std::string DataParallel::check_replicas(const ParamStore& store) {
  int64_t mine = log::crc32c(store.values.data, store.values.nbytes());
  std::vector<int64_t> all(size_t(comm_.size()));
  Tensor in = Tensor::view(&mine, {1}, DType::i64);
  Tensor out = Tensor::view(all.data(), {int64_t(all.size())}, DType::i64);
  comm_.all_gather(in, out);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error("replicated parameters differ across ranks: rank 0 crc32c {:08x}, rank {} crc32c {:08x}", all[0], r,
                  all[r]);
  return fmt::format("replicated parameters bitwise identical on {} ranks (crc32c {:08x})", all.size(), all[0]);
}

}  // namespace kiln::train
