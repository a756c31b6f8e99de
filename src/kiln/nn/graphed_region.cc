#include "kiln/nn/graphed_region.h"

#include "kiln/core/allocator.h"

namespace kiln::nn {

GraphedRegion::Entry& GraphedRegion::entry(const Key& key, const std::vector<bool>& grads) {
  for (Entry& e : entries_)
    if (e.key == key && e.grads_before == grads) return e;
  // A key that changes over a run (a dynamic loss scale) must not pile up graphs.
  if (entries_.size() == kMaxEntries) entries_.erase(entries_.begin());
  Entry& e = entries_.emplace_back();
  e.key = key;
  e.grads_before = grads;
  return e;
}

Tensor GraphedRegion::run(Context& ctx, bool capture, const Key& key, ParamStore* grads,
                          FunctionRef<Tensor()> body) {
  if (!capture) {
    host_key_ = key;
    host_ran_ = true;
    return body();
  }
  static const std::vector<bool> no_grads;
  Entry& e = entry(key, grads ? grads->grads_written() : no_grads);
  const bool valid = e.graph && e.allocations == device_allocation_count() && e.graph->can_replay();
  if (valid && host_ran_ && host_key_ == key) {
    e.graph->replay();
    if (grads) grads->set_grads_written(e.grads_after);
    return e.output;
  }
  host_key_ = key;
  host_ran_ = true;
  // Op by op the first time (what ops set up on first use happens outside a capture), and where
  // only the layers' host state was stale: the graph still holds.
  if (valid || !e.warm || !ops::OpGraph::can_capture(ctx)) {
    e.warm = true;
    return body();
  }
  Tensor output;
  e.graph = ops::OpGraph::capture(ctx, [&] { output = body(); });
  e.allocations = device_allocation_count();
  if (grads) e.grads_after = grads->grads_written();
  e.output = output;
  return output;
}

}  // namespace kiln::nn
