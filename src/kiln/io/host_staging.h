// io/host_staging.h — the host copies through which the checkpoints of a run whose model lives on
// a device (--device cuda or sim) are written and read. (The communicator of such a run is
// dist/run_world.h.)
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "kiln/core/context.h"
#include "kiln/io/checkpoint.h"
#include "kiln/nn/params.h"

namespace kiln::io {

// The state a checkpoint holds (the master weights, the optimizer state, the model's buffers
// such as BN statistics) as host tensors: that state itself when it lives on the host, else host
// copies (page-locked on a GPU: ops::host_staging_tensor), made by the first pull(), that pull()
// refreshes from the device and push() writes back. A run that never saves or loads holds none.
class HostStaging {
 public:
  HostStaging(Context& ctx, ParamStore& store, const std::vector<FlatState>& optimizer,
              const std::vector<FlatState>& buffers);

  // The host side; for state on a device or split master weights, valid after pull().
  ParamStore& store() { return staged_ || store_.split() ? *host_store_ : store_; }
  const std::vector<FlatState>& optimizer() const { return staged_ ? host_optimizer_ : optimizer_; }
  const std::vector<FlatState>& buffers() const { return staged_ ? host_buffers_ : buffers_; }
  // Device -> host copies. Split master weights are joined into the gradients' buffer first (dead
  // between steps: the next step's first contributions overwrite it), which on the host is the
  // host store's values.
  void pull();
  void push();  // host copies -> device; nothing on the host

 private:
  void make_host_copies();
  std::vector<FlatState> host_copies(const std::vector<FlatState>& state);

  Context& ctx_;
  ParamStore& store_;
  std::vector<FlatState> optimizer_, buffers_;
  bool staged_ = false;  // the state lives on a device
  std::optional<ParamStore> host_store_;
  std::vector<std::unique_ptr<Tensor>> host_tensors_;  // what host_optimizer_ / host_buffers_ point to
  std::vector<FlatState> host_optimizer_, host_buffers_;
};

}  // namespace kiln::io
