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

std::vector<PipelineOp> interleaved_one_f_one_b(int stages, int stage, int chunks, int64_t micro_batches) {
  KILN_CHECK(chunks > 0, "interleaved schedule: {} model chunks", chunks);
  if (chunks == 1) return one_f_one_b(stages, stage, micro_batches);
  KILN_CHECK(stages > 0 && stage >= 0 && stage < stages && micro_batches > 0,
             "interleaved schedule: stage {} of {} with {} micro-batches", stage, stages, micro_batches);
  if (micro_batches % stages != 0)
    throw Error("the interleaved pipeline schedule needs the micro-batches of a step per pipeline ({}) to be a "
                "multiple of --pipeline-model-parallel-size ({})", micro_batches, stages);
  const int64_t round = int64_t(stages) * chunks, total = micro_batches * chunks;
  const auto op = [&](PipelineOp::Kind kind, int64_t k) {
    const int in_round = int((k % round) / stages);
    return PipelineOp{kind, (k / round) * stages + k % stages, kind == PipelineOp::forward ? in_round : chunks - 1 - in_round};
  };
  const int64_t warmup = std::min<int64_t>(2 * int64_t(stages - stage - 1) + int64_t(chunks - 1) * stages, total);
  std::vector<PipelineOp> ops;
  for (int64_t k = 0; k < warmup; ++k) ops.push_back(op(PipelineOp::forward, k));
  for (int64_t k = 0; k < total - warmup; ++k) {
    ops.push_back(op(PipelineOp::forward, warmup + k));
    ops.push_back(op(PipelineOp::backward, k));
  }
  for (int64_t k = total - warmup; k < total; ++k) ops.push_back(op(PipelineOp::backward, k));
  return ops;
}

std::vector<ExchangeUnit> exchange_units(const std::vector<PipelineOp>& ops, bool pair_steady_state) {
  if (!pair_steady_state) {
    std::vector<ExchangeUnit> units;
    for (size_t i = 0; i < ops.size(); ++i) units.push_back({i, 1});
    return units;
  }
  size_t leading = 0;
  while (leading < ops.size() && ops[leading].kind == PipelineOp::forward) ++leading;
  const size_t warmup = 2 * leading == ops.size() ? leading : leading - 1;
  std::vector<ExchangeUnit> units;
  size_t i = 0;
  for (; i < warmup; ++i) units.push_back({i, 1});
  for (; i + 1 < ops.size() - warmup; i += 2) units.push_back({i, 2});
  for (; i < ops.size(); ++i) units.push_back({i, 1});
  return units;
}

int64_t micro_batches_in_flight(const std::vector<PipelineOp>& ops) {
  std::vector<int64_t> open;
  int64_t most = 0;
  for (const PipelineOp& op : ops) {
    if (open.size() <= size_t(op.chunk)) open.resize(size_t(op.chunk) + 1, 0);
    open[size_t(op.chunk)] += op.kind == PipelineOp::forward ? 1 : -1;
    most = std::max(most, open[size_t(op.chunk)]);
  }
  return most;
}

int64_t activations_in_flight(const std::vector<PipelineOp>& ops) {
  int64_t open = 0, most = 0;
  for (const PipelineOp& op : ops) most = std::max(most, open += op.kind == PipelineOp::forward ? 1 : -1);
  return most;
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
  const int stages = pp.size(), me = pp.rank(), chunks = stage.chunks();
  const int next = (me + 1) % stages, previous = (me + stages - 1) % stages;  // a ring when interleaved
  const std::array<int64_t, 4> layout{stages, me, chunks, micro_batches};
  if (reuse.schedule_of != layout) {
    reuse.schedule = interleaved_one_f_one_b(stages, me, chunks, micro_batches);
    reuse.units = exchange_units(reuse.schedule, chunks > 1);
    reuse.in_flight = micro_batches_in_flight(reuse.schedule);
    reuse.schedule_of = layout;
  }
  const int held = stage.slots();
  KILN_CHECK(held >= reuse.in_flight, "pipeline stage {} holds {} micro-batches per chunk, its schedule needs {}", me,
             held, reuse.in_flight);
  PipelineStepResult r;
  r.sum.parts.assign(loss_parts, 0.0);
  Pending& pending = reuse.pending;  // per chunk and slot: chunk x held + slot
  if (pending.size() < size_t(chunks * held)) pending.resize(size_t(chunks * held));
  const auto flat = [&](const PipelineOp& op) { return op.chunk * held + int(op.micro % held); };
  const auto is_first = [&](const PipelineOp& op) { return me == 0 && op.chunk == 0; };
  const auto is_last = [&](const PipelineOp& op) { return me == stages - 1 && op.chunk == chunks - 1; };
  std::vector<PipelineOutgoing>& outgoing = reuse.outgoing;  // the last unit's results
  outgoing.clear();
  std::array<Tensor, 2> received;  // per op of a unit: the activation or gradient it receives
  std::array<Step, 2> steps;       // per op of a unit: its micro-batch's step
  // Between units, one group: the last unit's results out, this unit's inputs in.
  const auto exchange = [&](const ExchangeUnit& unit) {
    std::array<int, 2> from{-1, -1};  // per op of the unit: the peer it receives from
    for (size_t i = 0; i < unit.ops; ++i) {
      const PipelineOp& op = reuse.schedule[unit.begin + i];
      const bool forward = op.kind == PipelineOp::forward;
      received[i] = Tensor{};
      if (forward ? is_first(op) : is_last(op)) continue;
      const int slot = int(op.micro % held);
      received[i] = forward ? stage.input_buffer(op.chunk, slot, steps[i])
                            : stage.output_grad_buffer(op.chunk, slot, steps[i]);
      from[i] = forward ? previous : next;
    }
    if (outgoing.empty() && from[0] < 0 && from[1] < 0) return;
    std::vector<std::unique_ptr<dist::Request>>& receives = reuse.receives;
    pp.group_start();
    for (const PipelineOutgoing& o : outgoing) pending[size_t(o.flat)].push_back(pp.isend(o.tensor, o.peer));
    outgoing.clear();
    for (size_t i = 0; i < unit.ops; ++i)
      if (from[i] >= 0) receives.push_back(pp.irecv(received[i], from[i]));
    pp.group_end();
    wait_all(receives);
  };
  for (const ExchangeUnit& unit : reuse.units) {
    for (size_t i = 0; i < unit.ops; ++i) {  // a forward's data first: its size sizes the receive
      const PipelineOp& op = reuse.schedule[unit.begin + i];
      steps[i] = make_step(op.micro);
      if (op.kind != PipelineOp::forward) continue;
      wait_all(pending[size_t(flat(op))]);
      Timer data_timer;
      stage.load(op.chunk, int(op.micro % held), steps[i]);
      r.data_seconds += data_timer.seconds();
    }
    exchange(unit);
    for (size_t i = 0; i < unit.ops; ++i) {
      const PipelineOp& op = reuse.schedule[unit.begin + i];
      const int slot = int(op.micro % held);
      wait_all(pending[size_t(flat(op))]);
      const Step step = i == 0 ? steps[0] : make_step(op.micro);  // a fresh scratch for the pair's second op
      if (op.kind == PipelineOp::forward) {
        MicroBatchLosses out;
        const Tensor y = stage.forward(op.chunk, slot, step, received[i], is_last(op) ? &out : nullptr);
        if (is_last(op)) r.sum.add(out, slots);
        else outgoing.push_back({y, next, flat(op)});
      } else {
        const Tensor dx = stage.backward(op.chunk, slot, step, received[i], grad_scale);
        if (!is_first(op)) outgoing.push_back({dx, previous, flat(op)});
      }
    }
  }
  exchange(ExchangeUnit{reuse.schedule.size(), 0});
  for (auto& p : pending) wait_all(p);
  stage.finish_gradients();
  broadcast_losses(r.sum, pp);
  return r;
}

}  // namespace kiln::train
