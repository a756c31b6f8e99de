#include "kiln/io/host_staging.h"

#include <memory>

#include "kiln/backend/backend.h"
#include "kiln/core/error.h"

namespace kiln::io {

HostStaging::HostStaging(Context& ctx, ParamStore& store, const std::vector<FlatState>& optimizer,
                         const std::vector<FlatState>& buffers)
    : ctx_(ctx), store_(store), optimizer_(optimizer), buffers_(buffers), staged_(!store.values.device.is_cpu()) {}

void HostStaging::make_host_copies() {
  host_store_.emplace(store_);  // the same specs; its tensors replaced by host ones
  host_store_->grads = host_store_->compute = host_store_->low = Tensor{};
  if (!staged_) {  // split master weights on the host, joined there
    host_store_->values = store_.grads;
    return;
  }
  host_store_->values = ops::host_staging_tensor(ctx_, {store_.padded_size()}, DType::f32);
  host_optimizer_ = host_copies(optimizer_);
  host_buffers_ = host_copies(buffers_);
}

std::vector<FlatState> HostStaging::host_copies(const std::vector<FlatState>& state) {
  std::vector<FlatState> out;
  for (const auto& [name, tensor] : state) {
    host_tensors_.push_back(std::make_unique<Tensor>(ops::host_staging_tensor(ctx_, tensor->shape, tensor->dtype)));
    out.emplace_back(name, host_tensors_.back().get());
  }
  return out;
}

void HostStaging::pull() {
  if (!staged_ && !store_.split()) return;
  if (!host_store_) make_host_copies();
  if (store_.split()) store_.join_master(store_.grads);  // on the host, the host store's values
  if (!staged_) return;
  ops::copy(ctx_, store_.split() ? store_.grads : store_.values, host_store_->values);
  for (size_t i = 0; i < optimizer_.size(); ++i) ops::copy(ctx_, *optimizer_[i].second, *host_optimizer_[i].second);
  for (size_t i = 0; i < buffers_.size(); ++i) ops::copy(ctx_, *buffers_[i].second, *host_buffers_[i].second);
}

void HostStaging::push() {
  KILN_CHECK(!store_.split(), "checkpoint staging: the master weights are split (restore before the first step)");
  if (!staged_) return;
  KILN_CHECK(host_store_, "checkpoint staging: push() before pull()");
  ops::copy(ctx_, host_store_->values, store_.values);
  for (size_t i = 0; i < optimizer_.size(); ++i) ops::copy(ctx_, *host_optimizer_[i].second, *optimizer_[i].second);
  for (size_t i = 0; i < buffers_.size(); ++i) ops::copy(ctx_, *host_buffers_[i].second, *buffers_[i].second);
}

}  // namespace kiln::io
