// train/pipeline_schedule.h — Megatron's 1F1B pipeline schedules (PipeDream-Flush,
// ../shared/specs/megatron-bert.md §3.3) for the training loop when the pipeline has P > 1
// stages.
//
// Non-interleaved: stage s runs, for its M micro-batches of a step:
//   warm-up:  min(P - s - 1, M) forwards;
//   steady:   M - warm-up times one forward, then the backward of the oldest micro-batch in flight;
//   cooldown: the remaining warm-up backwards.
// At most P - s micro-batches are in flight on stage s.
//
// Interleaved (--num-layers-per-virtual-pipeline-stage): each rank holds V model chunks; chunk c
// of rank p is virtual stage c P + p of P V, so an activation goes round the ring of ranks V
// times (rank P - 1's chunk c feeds rank 0's chunk c + 1). The M V forwards of a rank run in
// groups of P micro-batches per chunk: forward k is micro-batch (k div P V) P + k mod P of chunk
// (k mod P V) div P, backward k the same micro-batch of chunk V - 1 - (k mod P V) div P; the
// warm-up is min(2 (P - p - 1) + (V - 1) P, M V) forwards, then one forward and one backward
// (Megatron's forward_backward_pipelining_with_interleaving; M must be a multiple of P). The
// bubble shrinks from (P - 1) / M to (P - 1) / (V M) of the step.
//
// A chunk's micro-batches in flight are consecutive, so a chunk keeps that many slots of saved
// state (PipelineStage::slots; micro-batch m uses slot m mod slots).
// Activations (B*S, H) travel to the next stage and their gradients back, point to point over
// the pipeline group in the compute dtype. The schedule runs in exchange units and between two
// units one group of calls sends the last unit's results and receives this unit's inputs, so
// stages never wait on each other in a cycle even where a send waits for its receive in stream
// order (NCCL): plain, each op is a unit (Megatron's send_forward_recv_backward); interleaved, where
// that would hang, each warm-up forward, each steady forward + backward pair and each cooldown
// backward (Megatron's send_forward_backward_recv_forward_backward). Sends are non-blocking (a slot's
// buffers are not touched again before the sends that read them are done), receives are waited
// for before the unit runs. Between two ranks, messages arrive in the order they were sent; both
// schedules send and receive each direction's messages in the same order
// (tests/train/pipeline_*_test.cc).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kiln/core/step.h"
#include "kiln/core/tensor.h"
#include "kiln/dist/communicator.h"
#include "kiln/train/loop.h"

namespace kiln::train {

struct PipelineOp {
  enum Kind { forward, backward };
  Kind kind;
  int64_t micro;  // this rank's micro-batch index in the step
  int chunk = 0;  // the model chunk (interleaved schedule; 0 otherwise)
  bool operator==(const PipelineOp&) const = default;
};

// The order in which stage `stage` of `stages` runs the forwards and backwards of `micro_batches`.
std::vector<PipelineOp> one_f_one_b(int stages, int stage, int64_t micro_batches);
// Warm-up forwards of that schedule: min(stages - stage - 1, micro_batches).
int64_t warmup_forwards(int stages, int stage, int64_t micro_batches);
// The interleaved order of rank `stage` holding `chunks` model chunks (one_f_one_b for 1 chunk).
// Throws kiln::Error unless micro_batches is a multiple of stages.
std::vector<PipelineOp> interleaved_one_f_one_b(int stages, int stage, int chunks, int64_t micro_batches);
// Ops [begin, begin + ops) of a schedule that run between two exchanges of activations.
struct ExchangeUnit {
  size_t begin = 0, ops = 0;
};
// With pair_steady_state (the interleaved schedule): the warm-up forwards one by one, the steady
// state's forward + backward pairs, the cooldown's backwards one by one. Without (the plain one):
// every op alone, so that each result goes out with the next op's receive, before the next op
// runs (pairs would hold a forward's activation back for a backward, idling the next stage).
std::vector<ExchangeUnit> exchange_units(const std::vector<PipelineOp>& ops, bool pair_steady_state);
// The most micro-batches that any one chunk of `ops` has in flight at once.
int64_t micro_batches_in_flight(const std::vector<PipelineOp>& ops);
// The most forwards of `ops` whose backward has not run yet, over all chunks: the saved
// activations of that many micro-batch chunks are held at once.
int64_t activations_in_flight(const std::vector<PipelineOp>& ops);

// What a recipe provides to run its model as one stage of a pipeline.
class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  // Model chunks on this rank (1 unless the schedule is interleaved).
  virtual int chunks() const { return 1; }
  // Micro-batches whose saved state each chunk can hold at once (>= micro_batches_in_flight).
  virtual int slots() const = 0;
  // Loads the micro-batch that `step` describes into `chunk`'s `slot`.
  virtual void load(int chunk, int slot, const Step& step) = 0;
  // Where the previous stage's activation for the slot's loaded micro-batch is received.
  virtual Tensor input_buffer(int chunk, int slot, const Step& step) = 0;
  // Where the next stage's gradient for the slot's micro-batch is received (the shape of
  // forward's output).
  virtual Tensor output_grad_buffer(int chunk, int slot, const Step& step) = 0;
  // input: the received activation (undefined on the first stage). Returns the activation to send
  // (undefined on the last stage, which reports its losses instead).
  virtual Tensor forward(int chunk, int slot, const Step& step, const Tensor& input, MicroBatchLosses* losses) = 0;
  // grad_output: the received gradient (undefined on the last stage, which starts from its loss x
  // grad_scale). Returns the input's gradient to send (undefined on the first stage).
  virtual Tensor backward(int chunk, int slot, const Step& step, const Tensor& grad_output, float grad_scale) = 0;
  // After the last backward of a step (e.g. summing the tied embedding's gradients).
  virtual void finish_gradients() = 0;
};

// What run_pipeline_step keeps from one step to the next, so that a step allocates nothing once
// these are sized: the schedule (made again only for another layout) and, per chunk and slot, the
// sends still in flight. The caller owns it; destroying it waits for any send left in flight.
struct PipelineOutgoing {
  Tensor tensor;
  int peer = 0, flat = 0;  // flat: the sending slot, chunk x slots + slot
};
struct PipelineReuse {
  std::vector<PipelineOp> schedule;
  std::vector<ExchangeUnit> units;
  std::vector<PipelineOutgoing> outgoing;                  // a unit's results, sent at the next exchange
  std::vector<std::unique_ptr<dist::Request>> receives;  // an exchange's receives
  int64_t in_flight = 0;                                 // micro_batches_in_flight(schedule)
  std::array<int64_t, 4> schedule_of{-1, -1, -1, -1};  // stages, stage, chunks, micro-batches
  std::vector<std::vector<std::unique_ptr<dist::Request>>> pending;
};

struct PipelineStepResult {
  MicroBatchLosses sum;      // this rank's micro-batches (loss / `slots` each), the same on every stage
  double data_seconds = 0;   // in PipelineStage::load
};

// Runs one training step's micro-batches through the pipeline `pp` (this rank's stage is
// pp.rank()). make_step(micro) describes this rank's micro-batch `micro`; it is called before
// every forward and backward (the loop resets its per-op scratch there). Each micro-batch's loss
// counts 1 / slots in the sums (slots: micro-batches of the global batch over all data-parallel
// ranks). The losses of the last stage are broadcast to every stage.
PipelineStepResult run_pipeline_step(PipelineStage& stage, dist::Communicator& pp, int64_t micro_batches,
                                     int64_t slots, float grad_scale, size_t loss_parts, PipelineReuse& reuse,
                                     const std::function<Step(int64_t)>& make_step);

}  // namespace kiln::train
