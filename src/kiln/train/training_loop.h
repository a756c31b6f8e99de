// train/training_loop.h — the state and parts of run_training (train/loop.h), for the loop's own
// files: loop.cc (set-up, resume, the step sequence, the end), loop_step.cc (one step's
// micro-batches, reductions and update or skip), loop_report.cc (console, progress, TensorBoard),
// loop_events.cc (evaluations, MLPerf blocks / epochs, checkpoints).
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/core/timer.h"
#include "kiln/nn/graphed_region.h"
#include "kiln/optim/grad_norm.h"
#include "kiln/io/host_staging.h"
#include "kiln/optim/step_scalars.h"
#include "kiln/train/data_parallel.h"
#include "kiln/train/grad_buckets.h"
#include "kiln/train/loop.h"
#include "kiln/train/pipeline_schedule.h"
#include "kiln/train/test_hooks.h"
#include "kiln/train/update_graph.h"

namespace kiln::train {

// What one step did.
struct StepOutcome {
  MicroBatchLosses sum;        // over the global batch
  double seconds = 0;          // the whole step
  double data_seconds = 0;     // loading batches
  double comm_seconds = 0;     // reducing across ranks (waiting on them included)
  bool advanced = false;       // false: skipped for a non-finite loss or gradient norm
};

// Sums over the steps since the last console line.
struct Interval {
  Timer timer;
  double data = 0, compute = 0, comm = 0;  // seconds
  IntervalLosses losses;
  int64_t iterations = 0, skipped = 0, nan = 0;
};

class TrainingLoop {
 public:
  TrainingLoop(const LoopConfig& config, Recipe& recipe, TrainState state, Sinks& sinks,
               const ResumePoint& resume);
  LoopResult run();

 private:
  // loop.cc
  void restore();  // weights, optimizer, loss scaler and data position of the resume point
  void hold_whole_state(bool hold);  // whole_state_ allocated, or released
  void announce();
  void open_block(int64_t step);
  LoopResult finish();
  // loop_step.cc
  StepOutcome train_step(int64_t step);
  Step make_step(int64_t step, int64_t micro);
  MicroBatchLosses forward_backward(int64_t step, float grad_scale, double& data_seconds);
  void write_sample_offset(const Step& s);  // through offset_staging_
  void reduce_across_ranks(MicroBatchLosses& sum);
  bool update(int64_t done, const MicroBatchLosses& sum);  // false: the step was skipped
  void run_update_ops();  // the optimizer phase's ops: captured and replayed, or run op by op
  void skip(int64_t done, double loss, double grad_norm);
  // loop_report.cc
  void record(int64_t done, const StepOutcome& outcome);
  void report(int64_t done, const StepOutcome& outcome);
  std::string console_line(int64_t done, double elapsed) const;
  void show_progress(int64_t done);
  void clear_progress();
  log::NamedLosses named(const LossParts& values, double divisor) const;
  // loop_events.cc
  bool after_step(int64_t done);  // true: the target was reached
  double evaluate(int64_t done, int64_t epoch);
  bool reached(double metric, int64_t done);
  void track_stats(int64_t done);
  void save(int64_t step);
  void save_all(int64_t step);
  // dp_.comm() and every group of a model-parallel layout (save_all and evaluate relax their limits).
  std::vector<dist::Communicator*> communicators() const;
  nlohmann::json checkpoint_meta(int64_t step) const;

  const LoopConfig& c_;
  Recipe& recipe_;
  TrainState state_;
  Sinks& sinks_;
  const ResumePoint& resume_;
  std::ostream& console_;
  log::MlLogger* mllog_;
  log::TensorBoardWriter* tensorboard_;
  ParamStore& store_;
  optim::Optimizer& optimizer_;
  Context& ctx_;
  const bool epochs_;
  const int64_t steps_per_epoch_, total_epochs_;
  DataParallel& dp_;  // the run's (train/run_setup.h)
  const int64_t accumulation_;  // micro-batches per step on this rank
  const int64_t slots_;         // micro-batches per global batch, all ranks together
  optim::LossScaler scaler_;
  const NanInjection inject_nan_;
  const RankFailure rank_failure_;
  LossLog loss_log_;
  const std::vector<std::string> names_;  // the recipe's loss components
  // Checkpoints hold the optimizer state with the store's layout: a sharded optimizer's (ZeRO-1)
  // is gathered into whole buffers to save, and loaded whole, then each rank keeps its shard.
  // The whole buffers exist only meanwhile (hold_whole_state): the rest of the run holds shards.
  const bool sharded_;
  std::vector<Tensor> whole_state_;
  std::vector<io::FlatState> opt_state_;
  io::HostStaging host_;  // checkpoints of a model on a device
  const bool model_parallel_;
  // Gradient norms sum over the ranks holding other parts of the gradients: the model-parallel
  // group, and the data-parallel ranks' shards under a sharded optimizer.
  std::vector<dist::Communicator*> norm_groups_;
  optim::GradNorm grad_norm_;
  // The optimizer phase's inputs and decisions (learning rate, loss scale, clip, skip), on the
  // device between one write and one read per step.
  optim::StepScalars step_scalars_;
  GraphPlan graph_plan_;
  // Op by op at the first update (what ops set up on first use, the arena's size), captured at the
  // second, replayed after, captured again when the arena grew (an evaluation).
  nn::GraphedRegion update_graph_;
  std::optional<GradBuckets> buckets_;
  // A micro-batch's first global sample on the device (Step::sample_offset_tensor): one per
  // micro-batch of a step in a pipeline, else one for all.
  std::vector<Tensor> sample_offsets_;
  ops::HostStaging offset_staging_;
  PipelineReuse pipeline_reuse_;  // a pipeline stage's schedule and sends in flight, across steps

  LoopResult result_;
  int64_t start_step_ = 0, last_step_ = 0;
  int64_t skipped_before_ = 0;  // by the processes this run resumed from
  // The run's lineage in meta.json "run_id": new for a fresh run (or --finetune), the checkpoint's
  // for a resumed one (null where it has none); only its own checkpoints are pruned.
  nlohmann::json run_id_;
  int64_t consecutive_hopeless_ = 0;
  std::optional<double> last_grad_norm_;
  double lr_ = 0;
  std::vector<double> step_seconds_;
  Timer run_timer_;
  Interval interval_;
  bool progress_shown_ = false;
  const bool profiling_;  // KILN_PROFILE: every step after the first
  double profiled_seconds_ = 0;
  int64_t profiled_steps_ = 0;
  // MLPerf blocks open before their first step. A run resumed inside a block (or epoch) continues
  // the one its log holds.
  int64_t block_samples_ = 0, block_first_samples_ = 0;
  bool block_open_ = false;
};

}  // namespace kiln::train
