#include "kiln/train/pipeline_schedule.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>

#include "kiln/core/error.h"
#include "kiln/core/timer.h"

namespace kiln::train {

int64_t warmup_forwards(int stages, int stage, int64_t micro_batches) {
  return std::min<int64_t>(stages - stage - 1, micro_batches);
}

std::vector<PipelineOp> one_f_one_b(int stages, int stage, int64_t micro_batches) {
  KILN_CHECK(stages > 0 && stage >= 0 && stage < stages && micro_batches > 0,
             "1F1B schedule: stage {} of {} with {} micro-batches", stage, stages, micro_batches);
  const int64_t warmup = warmup_forwards(stages, stage, micro_batches);
  std::vector<PipelineOp> ops;
  int64_t forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) ops.push_back({PipelineOp::forward, forwards});
  for (; forwards < micro_batches; ++forwards) {
    ops.push_back({PipelineOp::forward, forwards});
    ops.push_back({PipelineOp::backward, backwards++});
  }
  for (; backwards < micro_batches; ++backwards) ops.push_back({PipelineOp::backward, backwards});
  return ops;
}

namespace {

// The sends of one slot still in flight: waited for before the slot is used again.
using Pending = std::vector<std::vector<std::unique_ptr<dist::Request>>>;

void wait_all(std::vector<std::unique_ptr<dist::Request>>& requests) {
  for (auto& r : requests) r->wait();
  requests.clear();
}

// Every stage gets the last stage's sums (so all make the same skip / clip / eval decisions).
void broadcast_losses(MicroBatchLosses& sum, dist::Communicator& pp) {
  MicroBatchLosses::Values v = sum.values();
  Tensor t = Tensor::view(v.begin(), {int64_t(v.size())}, DType::f64);
  pp.broadcast(t, pp.size() - 1);
  sum.set_values(v);
}

}  // namespace

PipelineStepResult run_pipeline_step(PipelineStage& stage, dist::Communicator& pp, int64_t micro_batches,
                                     int64_t slots, float grad_scale, size_t loss_parts, PipelineReuse& reuse,
                                     const std::function<Step(int64_t)>& make_step) {
  const int stages = pp.size(), me = pp.rank();
  const bool first = me == 0, last = me == stages - 1;
  const int held = stage.slots();
  KILN_CHECK(held >= stages - me, "pipeline stage {} holds {} micro-batches, 1F1B needs {}", me, held, stages - me);
  PipelineStepResult r;
  r.sum.parts.assign(loss_parts, 0.0);
  const std::array<int64_t, 3> layout{stages, me, micro_batches};
  if (reuse.schedule_of != layout) {
    reuse.schedule = one_f_one_b(stages, me, micro_batches);
    reuse.schedule_of = layout;
  }
  Pending& pending = reuse.pending;
  if (pending.size() < size_t(held)) pending.resize(size_t(held));
  // An op's result is sent with the next op's receive, in one group (Megatron's
  // send_forward_recv_backward): on a transport whose sends wait for the matching receive in
  // stream order (NCCL), a send queued ahead of a receive that the peer's send waits for would
  // hang both stages. It goes alone, first, when the next op receives nothing or reuses its slot.
  struct Unsent {
    Tensor tensor;
    int peer = 0, slot = 0;
  };
  std::optional<Unsent> unsent;
  const auto send_unsent = [&] {
    if (!unsent) return;
    pending[size_t(unsent->slot)].push_back(pp.isend(unsent->tensor, unsent->peer));
    unsent.reset();
  };
  for (const PipelineOp& op : reuse.schedule) {
    const bool forward = op.kind == PipelineOp::forward, receives = forward ? !first : !last;
    const int slot = int(op.micro % held);
    const Step step = make_step(op.micro);
    if (!receives || (unsent && unsent->slot == slot)) send_unsent();
    wait_all(pending[size_t(slot)]);
    if (forward) {
      Timer data_timer;
      stage.load(slot, step);
      r.data_seconds += data_timer.seconds();
    }
    Tensor received;  // the previous stage's activation, or the next stage's gradient
    if (receives) {
      received = forward ? stage.input_buffer(slot, step) : stage.output_grad_buffer(slot, step);
      pp.group_start();
      send_unsent();
      const std::unique_ptr<dist::Request> receive = pp.irecv(received, forward ? me - 1 : me + 1);
      pp.group_end();
      receive->wait();
    }
    if (forward) {
      MicroBatchLosses out;
      const Tensor y = stage.forward(slot, step, received, last ? &out : nullptr);
      if (last) r.sum.add(out, slots);
      else unsent = Unsent{y, me + 1, slot};
    } else {
      const Tensor dx = stage.backward(slot, step, received, grad_scale);
      if (!first) unsent = Unsent{dx, me - 1, slot};
    }
  }
  send_unsent();
  for (auto& p : pending) wait_all(p);
  stage.finish_gradients();
  broadcast_losses(r.sum, pp);
  return r;
}

}  // namespace kiln::train
