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
          "graphs: the optimizer phase (unscale, gradient norm, skip and clip decisions, update) and each "
          "micro-batch's forward and backward (everything between the batch's copies in and the losses' read-back) "
          "are captured in the first steps and replayed; under --overlap-grad-reduce the last micro-batch's forward "
          "layers only, its backward op by op (docs/ENGINE.md)"};
}

}  // namespace kiln::train
