#include "kiln/train/update_graph.h"

#include <cstdlib>
#include <cstring>

namespace kiln::train {

GraphPlan plan_update_graph(const Context& ctx, bool profiling, std::span<dist::Communicator* const> groups,
                            bool pipeline) {
  if (ctx.device.kind == DeviceKind::cpu) return {};
  const char* env = std::getenv("KILN_GRAPH");
  if (env && std::strcmp(env, "0") == 0) return {false, false, "graphs: off (KILN_GRAPH=0)"};
  if (profiling) return {false, false, "graphs: off under KILN_PROFILE (its op scopes synchronise the stream)"};
  for (const dist::Communicator* group : groups)
    if (group->size() > 1 && !group->can_capture())
      return {false, false, "graphs: off; the optimizer phase's collectives go through host buffers (NCCL can be "
                     "captured)"};
  if (pipeline)
    return {true, false,
            "graphs: the optimizer phase (unscale, gradient norm, skip and clip decisions, update) is captured "
            "after the first step and replayed; a pipeline stage's forward and backward run op by op"};
  return {true, true,
          "graphs: the optimizer phase (unscale, gradient norm, skip and clip decisions, update) and the layers' "
          "forward and backward are captured in the first steps and replayed; the ops around the layers (the "
          "batch's copy in, embeddings, heads, losses) run op by op: they read the losses back (docs/ENGINE.md)"};
}

}  // namespace kiln::train
