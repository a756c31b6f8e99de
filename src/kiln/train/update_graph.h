// train/update_graph.h — whether the training loop captures its optimizer phase (unscale,
// gradient norm, skip and clip decisions, update: loop_step.cc) and the model its layers' forward
// and backward (nn/graphed_region.h) in graphs (backend/graph.h) replayed every step, and what
// keeps them from doing so.
#pragma once
#include <span>
#include <string>

#include "kiln/core/context.h"
#include "kiln/dist/communicator.h"

namespace kiln::train {

struct GraphPlan {
  bool capture = false;          // the optimizer phase
  bool capture_layers = false;   // the model's layers (Step::capture_regions)
  std::string note;  // the start line's words on graphs; empty on the host
};

// On a GPU or the simulated device, unless KILN_GRAPH=0, KILN_PROFILE (its scopes synchronise
// the stream) or a collective of the phase (`groups` of more than one rank) that cannot be
// captured (dist::Communicator::can_capture). The layers too, except in a pipeline (its stages'
// instances per micro-batch slot are not graphed yet).
GraphPlan plan_update_graph(const Context& ctx, bool profiling, std::span<dist::Communicator* const> groups,
                            bool pipeline);

}  // namespace kiln::train
