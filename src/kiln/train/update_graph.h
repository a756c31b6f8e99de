// train/update_graph.h — whether the training loop captures its optimizer phase (unscale,
// gradient norm, skip and clip decisions, update: loop_step.cc) in a graph (backend/graph.h) and
// replays it every step, and what keeps it from doing so.
#pragma once
#include <span>
#include <string>

#include "kiln/core/context.h"
#include "kiln/dist/communicator.h"

namespace kiln::train {

struct GraphPlan {
  bool capture = false;
  std::string note;  // the start line's words on graphs; empty on the host
};

// On a GPU or the simulated device, unless KILN_GRAPH=0, KILN_PROFILE (its scopes synchronise
// the stream) or a collective of the phase (`groups` of more than one rank) that cannot be
// captured (dist::Communicator::can_capture).
GraphPlan plan_update_graph(const Context& ctx, bool profiling, std::span<dist::Communicator* const> groups);

}  // namespace kiln::train
