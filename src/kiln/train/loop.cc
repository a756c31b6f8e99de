#include "kiln/train/loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "kiln/backend/devices.h"
#include "kiln/backend/profile.h"
#include "kiln/core/cpu_features.h"
#include "kiln/core/error.h"
#include "kiln/log/bert_mllog.h"
#include "kiln/log/resnet_mllog.h"
#include "kiln/log/submission.h"
#include "kiln/train/run_report.h"
#include "kiln/train/training_loop.h"
#include "kiln/train/whole_model.h"

namespace kiln::train {

namespace {

// 64 random bits, in hex: a run's lineage (training_loop.h).
std::string new_run_id() {
  std::random_device entropy;
  return fmt::format("{:08x}{:08x}", entropy(), entropy());
}

// --overlap-grad-reduce: the buckets that reduce the gradients during backward, where they can;
// says once how the gradients are reduced when overlap was asked for.
void make_overlapped_buckets(std::optional<GradBuckets>& buckets, const LoopConfig& c, const DataParallel& dp,
                             ParamStore& store, std::ostream& console) {
  if (!c.ddp.overlap_grad_reduce || dp.ranks() == 1) return;
  if (dp.sharded()) {
    console << "--overlap-grad-reduce: with the distributed optimizer the gradients are reduce-scattered after "
               "backward (no buckets)\n";
    return;
  }
  const int64_t elements = c.ddp.bucket_size > 0 ? c.ddp.bucket_size : default_bucket_elements(dp.ranks());
  dist::Communicator& comm = dp.comm();
  buckets.emplace(comm, store, elements);
  console << fmt::format("gradient buckets: {} of >= {} elements, {}\n", buckets->buckets().size(), elements,
                         comm.can_overlap() ? "each all-reduced during backward as soon as its gradients are final"
                                            : "all-reduced in turn after backward (MPI without "
                                              "MPI_THREAD_MULTIPLE: no overlap)");
}

// (The batch split was checked once, by the run's DataParallel.)
int64_t steps_per_epoch(const LoopConfig& c) { return std::max<int64_t>(1, c.cadence.steps_per_epoch); }

}  // namespace

RunContext::RunContext(Device device) : scratch(device), ctx(device_context(device)) { ctx.scratch = &scratch; }

TrainingLoop::TrainingLoop(const LoopConfig& config, Recipe& recipe, TrainState state, Sinks& sinks,
                           const ResumePoint& resume)
    : c_(config),
      recipe_(recipe),
      state_(std::move(state)),
      sinks_(sinks),
      resume_(resume),
      console_(sinks.console()),
      mllog_(sinks.mllog()),
      tensorboard_(sinks.tensorboard()),
      store_(state_.store),
      optimizer_(state_.optimizer),
      ctx_(state_.run.ctx),
      epochs_(c_.cadence.kind == Cadence::Kind::epochs),
      steps_per_epoch_(steps_per_epoch(c_)),
      total_epochs_(c_.total_steps / steps_per_epoch_),
      dp_(state_.dp),
      accumulation_(dp_.micro_batches_per_rank()),
      slots_(dp_.slots()),
      scaler_(c_.loss_scaler),
      inject_nan_(test_nan_injection()),
      rank_failure_(test_rank_failure()),
      names_(recipe.loss_names()),
      sharded_(dp_.sharded()),
      whole_state_(sharded_ ? optimizer_.state().size() : 0),
      opt_state_([this] {
        std::vector<io::FlatState> flat;
        const std::vector<optim::NamedState> named = optimizer_.state();
        for (size_t i = 0; i < named.size(); ++i) {
          flat.emplace_back(named[i].name, sharded_ ? &whole_state_[i] : named[i].data);
        }
        return flat;
      }()),
      host_(ctx_, store_, opt_state_, state_.buffers),
      model_parallel_(state_.groups && state_.groups->model_parallel()),
      grad_norm_(store_, ctx_),
      step_scalars_(ctx_),
      profiling_(ops::profile_requested()) {
  if (model_parallel_) norm_groups_.push_back(state_.groups->model.get());
  if (sharded_) norm_groups_.push_back(&dp_.comm());
  graph_plan_ = plan_update_graph(ctx_, profiling_, norm_groups_, recipe_.pipeline() != nullptr);
  // A pipeline holds several micro-batches between their forward and backward; elsewhere one
  // offset, rewritten per micro-batch, is what a graph of the layers reads at every replay.
  for (int64_t micro = 0; micro < (recipe_.pipeline() ? accumulation_ : 1); ++micro)
    sample_offsets_.push_back(Tensor::empty({1}, DType::i64, ctx_.device));
  interval_.losses.parts.assign(names_.size(), 0.0);
}

void TrainingLoop::hold_whole_state(bool hold) {
  for (Tensor& t : whole_state_) t = hold ? Tensor::empty({store_.padded_size()}) : Tensor{};
}

void TrainingLoop::restore() {
  run_id_ = new_run_id();
  if (!resume_.checkpoint) return;
  const io::CheckpointMeta& meta = *resume_.checkpoint;
  hold_whole_state(true);
  host_.pull();  // what the checkpoint does not replace keeps its value
  io::load_checkpoint(meta.dir(), host_.store(),
                      resume_.loads_optimizer() ? host_.optimizer() : std::vector<io::FlatState>{}, host_.buffers());
  host_.push();
  if (sharded_ && resume_.loads_optimizer()) dp_.scatter_state(ctx_, store_, whole_state_, optimizer_.state());
  hold_whole_state(false);
  if (!resume_.continues_run()) {
    console_ << fmt::format("--finetune: loaded the weights of {}; starting at step 0 with a fresh optimizer\n",
                            meta.dir().string());
    return;
  }
  start_step_ = meta.integer("step");
  skipped_before_ = meta.integer("skipped_steps");
  run_id_ = meta.contains("run_id") ? nlohmann::json(meta.string("run_id")) : nlohmann::json();
  if (resume_.loads_optimizer()) {
    optimizer_.set_steps_taken(meta.integer("optimizer_steps"));
    if (meta.contains("loss_scaler")) scaler_.load_state(meta.at("loss_scaler"));
  } else {
    console_ << "--no-load-optim: the optimizer starts fresh (moments, step count, learning-rate schedule)\n";
  }
  recipe_.resume(meta, start_step_, sinks_);
}

void TrainingLoop::announce() {
  console_ << recipe_.start_line(start_step_);
  if (sharded_)
    console_ << fmt::format("distributed optimizer (ZeRO-1): each of {} ranks updates and keeps the state of {} of "
                            "the {} parameter elements\n",
                            dp_.ranks(), dp_.shard(store_).size, store_.size());
  make_overlapped_buckets(buckets_, c_, dp_, store_, console_);
  console_ << (ctx_.device.kind == DeviceKind::cuda
                   ? fmt::format("precision: {} on {} (cuBLASLt / cuDNN, f32 accumulation{})",
                                 dtype_name(store_.compute_dtype()), ctx_.device.str(),
                                 store_.compute_dtype() == DType::f32 ? ", no TF32" : "")
                   : precision_note(store_.compute_dtype(), cpu_features()))
           << (scaler_.enabled() ? fmt::format("; loss scaling {}", scaler_.describe()) : std::string()) << "\n";
  if (!graph_plan_.note.empty()) console_ << graph_plan_.note << "\n";
  console_.flush();
}

void TrainingLoop::open_block(int64_t step) {
  if (!epochs_ && !block_open_) {
    block_first_samples_ = step * dp_.global_batch();
    if (mllog_) log::log_bert_block_start(*mllog_, block_first_samples_, block_samples_);
    block_open_ = true;
  }
  if (epochs_ && mllog_ && step % steps_per_epoch_ == 0) log::log_resnet_epoch_start(*mllog_, step / steps_per_epoch_ + 1);
}

LoopResult TrainingLoop::run() {
  restore();
  result_.steps = start_step_;
  result_.epochs = epochs_ ? start_step_ / steps_per_epoch_ : 0;
  if (dp_.ranks() > 1) dp_.broadcast_weights(store_);
  store_.refresh_compute();  // the compute copy follows the (initialised or restored) weights
  store_.split_master();
  if (resume_.continues_run() && resume_.checkpoint->boolean("target_reached")) {
    result_.reached_target = true;  // its MLPerf log already ends with run_stop
    console_ << fmt::format("the run reached its target at step {}: nothing left to train\n", start_step_);
    return result_;
  }
  if (mllog_ && !resume_.continues_run() && !c_.run_started) log::log_run_start(*mllog_);
  announce();

  last_step_ = c_.benchmark > 0 ? std::min(c_.total_steps, start_step_ + c_.benchmark) : c_.total_steps;
  if (c_.exit_interval > 0) last_step_ = std::min(last_step_, c_.exit_interval);
  // The per-step history, reserved whole: a step allocates nothing (tests/train/memory_test.cc).
  step_seconds_.reserve(size_t(std::max<int64_t>(last_step_ - start_step_, 0)));
  result_.losses.reserve(size_t(std::max<int64_t>(last_step_ - start_step_, 0)));
  if (!epochs_ && c_.cadence.eval_at_start && c_.benchmark == 0) evaluate(start_step_, 0);
  block_samples_ = c_.cadence.eval_interval * dp_.global_batch();
  block_open_ = !epochs_ && start_step_ % c_.cadence.eval_interval != 0;
  block_first_samples_ = start_step_ / c_.cadence.eval_interval * c_.cadence.eval_interval * dp_.global_batch();
  interval_.timer.reset();
  run_timer_.reset();

  for (int64_t step = start_step_; step < last_step_; ++step) {
    open_block(step);
    rank_failure_.at(dp_.rank(), step + 1);
    const StepOutcome outcome = train_step(step);
    const int64_t done = step + 1;
    record(done, outcome);
    report(done, outcome);
    if (after_step(done)) break;
  }
  return finish();
}

LoopResult TrainingLoop::finish() {
  clear_progress();
  result_.loss_scale = scaler_.scale();
  if (profiling_) console_ << ops::profile_report(profiled_seconds_, profiled_steps_);
  if (ctx_.graph_captures > 0)
    console_ << fmt::format("graphs: {} captured, {} replay{} (the optimizer phase; the micro-batches' forward "
                            "and backward)\n",
                            ctx_.graph_captures, ctx_.graph_replays, ctx_.graph_replays == 1 ? "" : "s");
  if (c_.benchmark > 0 && !step_seconds_.empty()) {
    console_ << estimated_training_time(step_seconds_, c_.total_steps);
    evaluate(result_.steps, result_.epochs);
  }
  if (!result_.reached_target && c_.benchmark == 0 && result_.steps == c_.total_steps && mllog_)
    log::log_run_stop(*mllog_, false);
  if (dp_.ranks() > 1) console_ << dp_.check_replicas(store_) << "\n";
  if (state_.groups && state_.groups->tp->size() > 1) console_ << check_replicas(*state_.groups->tp, store_, true) << "\n";
  if (tensorboard_) tensorboard_->flush();
  console_.flush();
  return result_;
}

LoopResult run_training(const LoopConfig& c, Recipe& recipe, TrainState state, Sinks& sinks,
                        const ResumePoint& resume) {
  TrainingLoop loop(c, recipe, std::move(state), sinks, resume);
  return loop.run();
}

}  // namespace kiln::train
