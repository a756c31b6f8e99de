// train/loop.h — the one training loop that BERT and ResNet share. A recipe (train/recipes/)
// says what is specific to a model: how a micro-batch is loaded and run, how it evaluates, what
// its console line shows. The loop does the rest, the same way for both:
//
//   resume from the checkpoint the recipe found (train/resume.h): weights, optimizer, loss
//   scaler, data position; MLPerf run_start unless the run continues its log; per step:
//     zero grads; per micro-batch: load (timed as data), forward, backward of loss x scale / M
//     (M: micro-batches per global batch over all data-parallel ranks; train/data_parallel.h);
//     then every micro-batch's losses, read back after the last backward;
//     with a pipeline (Recipe::pipeline) the same micro-batches in the 1F1B order of
//     train/pipeline_schedule.h, the losses coming from the last stage
//     with several ranks: gradients, losses and counters summed across them (gradients in
//     buckets started during the last micro-batch's backward with --overlap-grad-reduce,
//     train/grad_buckets.h)
//     unscale (1/scale); global grad norm; a non-finite loss or norm skips the step (weights,
//     optimizer state and the LR schedule's step untouched), counts it, warns, and lowers a
//     dynamic loss scale; else optimizer.step(lr(optimizer steps), clip factor (clip_grad > 0))
//     `max_skipped_steps` consecutive skips that the scale cannot fix stop the run with an error
//     naming the step (no checkpoint is written over the last good one)
//   console line every log_interval steps (kiln or Megatron format), a progress line with ETA on
//   a terminal, TensorBoard scalars; evaluations, MLPerf blocks (BERT) or epochs (ResNet),
//   stop at the target, checkpoints; BENCHMARK=N: N steps, the estimated time to train, one eval.
// Sinks (console, MLPerf log, TensorBoard, checkpoints; train/sinks.h) write on rank 0 only.
// With several data-parallel ranks, every rank starts from rank 0's weights, and the run ends by
// checking that all ranks hold bitwise the same weights (a console line says so).
// A checkpoint records the MLPerf log's position, so a resumed run continues the log where the
// checkpoint was: the block (BERT) or epoch (ResNet) open then stays open, no second run_start.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/dtype.h"
#include "kiln/core/step.h"
#include "kiln/dist/communicator.h"
#include "kiln/dist/parallel_groups.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/checkpoint_meta.h"
#include "kiln/log/megatron_log.h"
#include "kiln/nn/params.h"
#include "kiln/optim/loss_scaler.h"
#include "kiln/optim/lr_schedule.h"
#include "kiln/optim/optimizer.h"
#include "kiln/train/config/ddp_config.h"
#include "kiln/train/config/mlperf_phase.h"
#include "kiln/train/config/resolved_config.h"
#include "kiln/train/data_parallel.h"
#include "kiln/train/resume.h"
#include "kiln/train/sinks.h"

namespace kiln::train {

class PipelineStage;  // train/pipeline_schedule.h

// A recipe's loss components, in the order of Recipe::loss_names() (inline: a step allocates nothing).
using LossParts = InlineVector<double, 4>;

// What one micro-batch's forward and backward report.
struct MicroBatchLosses {
  double loss = 0;             // the loss whose gradient was taken
  LossParts parts;
  int64_t correct = 0, count = 0;  // training accuracy counters (ResNet), else 0

  // this += out, its losses divided by `slots` (the micro-batches of the global batch).
  void add(const MicroBatchLosses& out, int64_t slots);
  // loss, correct, count, then the parts: one list for a collective, and back.
  using Values = InlineVector<double, 3 + LossParts::kCapacity>;
  Values values() const;
  void set_values(const Values& v);
};

// Sums over the steps of one console interval that were not skipped.
struct IntervalLosses {
  int64_t steps = 0;           // advanced (not skipped) steps
  double loss = 0;             // sums
  LossParts parts;
  int64_t correct = 0, count = 0;
  double last_loss = 0;        // of the newest advanced step
};

// When evaluations, MLPerf blocks / epochs and checkpoints happen.
struct Cadence {
  // blocks (MLPerf BERT): an evaluation every `eval_interval` steps and after the schedule's last
  //   step, each inside an MLPerf block; a checkpoint every `save_interval` steps and after the
  //   last step run. `eval_at_start` also evaluates before the first step (not in the MLPerf log).
  // epochs (MLPerf ResNet): epochs of `steps_per_epoch` steps between epoch_start / epoch_stop;
  //   after epoch e an evaluation when (e - eval_start_epoch) % eval_every == 0, e >=
  //   eval_every_epoch_from (> 0; tinygrad's 33) or e is the last (evaluates_after_epoch),
  //   a checkpoint when e % save_interval == 0 or the run stops there; a run that stops inside an
  //   epoch (--exit-interval) saves a checkpoint there, without an evaluation.
  enum class Kind { blocks, epochs };
  Kind kind = Kind::blocks;
  int64_t eval_interval = 1;
  int64_t steps_per_epoch = 1, eval_start_epoch = 0, eval_every = 1, eval_every_epoch_from = 0;
  int64_t save_interval = 1;
  bool eval_at_start = false;

  // Epochs: whether epoch `epoch` (1-based) of `total_epochs` ends with an evaluation.
  bool evaluates_after_epoch(int64_t epoch, int64_t total_epochs) const;
};

struct LoopConfig {
  int64_t seed = 0;
  int64_t total_steps = 1;         // the schedule's length
  int64_t benchmark = 0;           // > 0: run this many steps, print the estimate, evaluate once
  int64_t exit_interval = 0;       // > 0: stop after this step
  int64_t log_interval = 1;
  DdpConfig ddp;                   // --overlap-grad-reduce: gradients reduced in buckets during backward
  double clip_grad = 0;            // global-norm clip; 0: none
  double target = 1.0;             // the evaluation metric that ends the run
  // Seconds the ranks wait for each other across a checkpoint save (rank 0 writes, the others
  // wait) and an evaluation, instead of --dist-timeout; 0: no limit.
  double save_timeout = 3600;
  optim::LossScalerConfig loss_scaler;
  int64_t max_skipped_steps = 10;  // consecutive skips that the loss scale cannot fix; 0: no limit
  Cadence cadence;
  bool megatron_log = false;       // Megatron's console line instead of kiln's
  bool progress = false;           // a progress line with ETA between console lines (a terminal)
  bool run_started = false;        // the run phase of a two-process run logged run_start already
  ResolvedConfig resolved;         // saved with each checkpoint
  RunSettings settings;            // saved with each checkpoint; a resumed run must match them
};

// The loop settings that every recipe's config (BertTrainConfig, ResNetTrainConfig) spells the
// same way; the recipe adds its steps, batches, cadence and checkpoint settings.
template <typename RecipeConfig>
LoopConfig shared_loop_config(const RecipeConfig& c) {
  LoopConfig loop;
  loop.seed = c.seed;
  loop.benchmark = c.benchmark;
  loop.exit_interval = c.exit_interval;
  loop.ddp = c.ddp;
  loop.log_interval = c.log_interval;
  loop.target = c.target;
  loop.loss_scaler = c.precision.scaler;
  loop.max_skipped_steps = c.precision.max_skipped_steps;
  loop.save_timeout = c.save_timeout;
  loop.progress = c.progress;
  loop.run_started = c.mlperf.phase == MlperfPhase::run;
  return loop;
}

class Recipe {
 public:
  virtual ~Recipe() = default;
  // Names of MicroBatchLosses::parts for Megatron's line and TensorBoard ({"lm loss", "sop loss"}).
  virtual std::vector<std::string> loss_names() const = 0;
  // Loads the micro-batch that `step` describes (index, sample_offset); the loop times it as data.
  virtual void load(const Step& step) = 0;
  // Forward and backward of the loaded micro-batch `micro` (0-based) of the step; the gradient of
  // its loss, multiplied by `grad_scale` (loss scale / micro-batches), accumulates into the store's
  // gradients. Its losses may stay on the device until read_losses(micro): the loop reads them all
  // after the step's last backward, so that the host loads the next micro-batch while a device
  // still runs this one.
  virtual void forward_backward(const Step& step, int64_t micro, float grad_scale) = 0;
  virtual MicroBatchLosses read_losses(int64_t micro) = 0;
  // Evaluates after `done` steps (`epoch` with Cadence::epochs, else 0), prints its lines to
  // `sinks`, and returns the metric compared with LoopConfig::target.
  virtual double evaluate(int64_t done, int64_t epoch, Sinks& sinks) = 0;
  // The console line's loss part ("loss 7.1234 (mlm 7.0, nsp 0.69)") and what samples are.
  virtual std::string loss_text(const IntervalLosses& interval) const = 0;
  virtual const char* sample_unit() const { return "samples"; }
  // What evaluate() returns, for the target line ("masked-LM accuracy", "top-1").
  virtual std::string metric_name() const = 0;
  virtual double flops_per_sample() const = 0;
  // After a checkpoint at `step` was restored to continue its run: move the data to where that
  // step begins (not called for --finetune, which starts at step 0).
  virtual void resume(const io::CheckpointMeta& meta, int64_t step, Sinks& sinks) = 0;
  // Recipe-specific fields of a checkpoint's meta.json (e.g. samples_consumed).
  virtual void add_meta(nlohmann::json& meta) const {}
  // The "training ..." line printed before the first step.
  virtual std::string start_line(int64_t start_step) const = 0;
  // Pipeline-parallel runs: this rank's stage, which the loop runs with the 1F1B schedule instead
  // of load + forward_backward per micro-batch.
  virtual PipelineStage* pipeline() { return nullptr; }
};

// Slot `micro` of `slots`: a (numel) i64 tensor on ctx's device per micro-batch, made on first use
// (a recipe's loss totals between forward_backward and read_losses).
Tensor& micro_batch_slot(std::vector<Tensor>& slots, int64_t micro, Context& ctx, int64_t numel);

struct LoopResult {
  int64_t steps = 0;                  // iterations completed (including resumed and skipped ones)
  int64_t epochs = 0;                 // epochs completed (Cadence::epochs)
  int64_t skipped_steps = 0;          // skipped by this process for a non-finite loss or gradient norm
  int64_t nan_steps = 0;              // of those, the ones whose loss itself was not finite
  std::vector<double> losses;         // loss of each step this process ran (skipped ones too)
  std::vector<double> evals;          // evaluation metrics, in order
  double loss_scale = 1;              // at the end
  bool reached_target = false;
  std::filesystem::path checkpoint;   // newest checkpoint written, if any
};

// A run's execution context: one Context on the run's device (--device) whose scratch is the
// run's Arena there. Made before the model and optimizer: the model is built and initialised on
// the host, moved onto ctx.device (ParamStore::to_device), and then the optimizer (constructor
// argument), the norms, the losses and every micro-step's ops (Step::ctx) run on it. The loop
// resets the arena at the start of every micro-batch; after the first one it holds a single
// block of the measured high-water size, so the steady-state step allocates nothing and sees
// stable addresses. Not copyable: `ctx.scratch` points into it.
struct RunContext {
  explicit RunContext(Device device = Device::cpu());
  Arena scratch;
  Context ctx;
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;
};

// The model's state the loop saves and restores, and the context it runs on. The batches, the
// sharding (--use-distributed-optimizer, ZeRO-1: the optimizer, made with DataParallel::shard,
// updates this rank's shard; gradients are reduce-scattered, weights all-gathered after the update)
// are the DataParallel's; the compute dtype is the store's.
struct TrainState {
  ParamStore& store;
  optim::Optimizer& optimizer;
  const optim::LrSchedule& schedule;
  std::vector<io::FlatState> buffers;  // non-parameter model state (BN running statistics)
  RunContext& run;                     // the one the store and optimizer were made with
  DataParallel& dp;                    // over the data-parallel ranks (dist::world() without TP / PP)
  // Tensor- and pipeline-parallel runs: every group of the layout (dp is over groups->dp).
  const dist::ParallelGroups* groups = nullptr;
};

// Runs the loop above from `resume` (find_resume_point). The caller opened the MLPerf log
// (Sinks::open_mllog) and, unless the run continues its log, logged init_start before building
// the model. Throws kiln::Error when `max_skipped_steps` consecutive steps were skipped.
LoopResult run_training(const LoopConfig& config, Recipe& recipe, TrainState state, Sinks& sinks,
                        const ResumePoint& resume);

}  // namespace kiln::train
