// train/pipeline_schedule.h — Megatron's non-interleaved 1F1B pipeline schedule (PipeDream-Flush,
// ../shared/specs/megatron-bert.md §3.3) for the training loop when the pipeline has P > 1
// stages. Stage s runs, for its M micro-batches of a step:
//   warm-up:  min(P - s - 1, M) forwards;
//   steady:   M - warm-up times one forward, then the backward of the oldest micro-batch in flight;
//   cooldown: the remaining warm-up backwards.
// At most P - s micro-batches are in flight on stage s, so a stage keeps that many slots of
// saved state (PipelineStage::slots; micro-batch m uses slot m mod slots).
// Activations (B*S, H) travel to the next stage and their gradients back, point to point over
// the pipeline group in the compute dtype: sends are non-blocking (a send's buffer is not
// touched again before its slot's next use, which waits for it), receives block. An op's send is
// issued in one group with the next op's receive (Megatron's send_forward_recv_backward), so
// stages never wait on each other in a cycle even where a send waits for its receive in stream
// order (NCCL).
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
  bool operator==(const PipelineOp&) const = default;
};

// The order in which stage `stage` of `stages` runs the forwards and backwards of `micro_batches`.
std::vector<PipelineOp> one_f_one_b(int stages, int stage, int64_t micro_batches);
// Warm-up forwards of that schedule: min(stages - stage - 1, micro_batches).
int64_t warmup_forwards(int stages, int stage, int64_t micro_batches);

// What a recipe provides to run its model as one stage of a pipeline.
class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  // Micro-batches whose saved state the stage can hold at once (>= P - stage).
  virtual int slots() const = 0;
  // Loads the micro-batch that `step` describes into `slot`.
  virtual void load(int slot, const Step& step) = 0;
  // Where the previous stage's activation for `slot`'s loaded micro-batch is received.
  virtual Tensor input_buffer(int slot, const Step& step) = 0;
  // Where the next stage's gradient for `slot`'s micro-batch is received (the shape of forward's
  // output).
  virtual Tensor output_grad_buffer(int slot, const Step& step) = 0;
  // input: the received activation (undefined on the first stage). Returns the activation to send
  // (undefined on the last stage, which reports its losses instead).
  virtual Tensor forward(int slot, const Step& step, const Tensor& input, MicroBatchLosses* losses) = 0;
  // grad_output: the received gradient (undefined on the last stage, which starts from its loss x
  // grad_scale). Returns the input's gradient to send (undefined on the first stage).
  virtual Tensor backward(int slot, const Step& step, const Tensor& grad_output, float grad_scale) = 0;
  // After the last backward of a step (e.g. summing the tied embedding's gradients).
  virtual void finish_gradients() = 0;
};

// What run_pipeline_step keeps from one step to the next, so that a step allocates nothing once
// these are sized: the 1F1B schedule (made again only for another layout) and, per slot, the sends
// still in flight. The caller owns it; destroying it waits for any send left in flight.
struct PipelineReuse {
  std::vector<PipelineOp> schedule;
  std::array<int64_t, 3> schedule_of{-1, -1, -1};  // stages, stage, micro-batches
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
