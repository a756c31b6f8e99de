// train/loop_events.cc — what happens between TrainingLoop's steps: evaluations inside MLPerf
// blocks (BERT) or at epoch ends (ResNet), the stop at the target, checkpoints.
#include <fmt/format.h>

#include "kiln/log/bert_mllog.h"
#include "kiln/log/mllog_keys.h"
#include "kiln/log/resnet_mllog.h"
#include "kiln/log/submission.h"
#include "kiln/train/test_hooks.h"
#include "kiln/train/training_loop.h"
#include "kiln/train/whole_model.h"

namespace kiln::train {
namespace {

// The run's communicators waiting up to `seconds` (0: forever) for the other ranks within a
// scope, instead of --dist-timeout: a save that rank 0 writes, or an evaluation, may take
// longer than any step's collective, and the other ranks wait for it.
class LongerWaits {
 public:
  LongerWaits(std::vector<dist::Communicator*> comms, double seconds) : comms_(std::move(comms)) {
    for (dist::Communicator* c : comms_) {
      before_.push_back(c->timeout());
      c->set_timeout(seconds);
    }
  }
  ~LongerWaits() {
    for (size_t i = 0; i < comms_.size(); ++i) comms_[i]->set_timeout(before_[i]);
  }
  LongerWaits(const LongerWaits&) = delete;
  LongerWaits& operator=(const LongerWaits&) = delete;

 private:
  std::vector<dist::Communicator*> comms_;
  std::vector<double> before_;
};

}  // namespace

std::vector<dist::Communicator*> TrainingLoop::communicators() const {
  std::vector<dist::Communicator*> all = {&dp_.comm()};
  if (const dist::ParallelGroups* g = state_.groups)
    for (const auto* group : {&g->tp, &g->pp, &g->model, &g->embedding})
      if (*group && group->get() != &dp_.comm()) all.push_back(group->get());
  return all;
}

// tinygrad's test, (e + 1 - EVAL_START_EPOCH) % EVAL_FREQ == 0 or e + 1 >= 33 with its 0-based e;
// C++'s % and Python's agree on which differences are multiples (before the start epoch too).
bool Cadence::evaluates_after_epoch(int64_t epoch, int64_t total_epochs) const {
  const bool every_epoch = eval_every_epoch_from > 0 && epoch >= eval_every_epoch_from;
  return (epoch - eval_start_epoch) % eval_every == 0 || every_epoch || epoch == total_epochs;
}

bool TrainingLoop::after_step(int64_t done) {
  if (!epochs_) {
    const bool eval_now = c_.benchmark == 0 && (done % c_.cadence.eval_interval == 0 || done == c_.total_steps);
    if (eval_now) {
      const int64_t samples_seen = done * dp_.global_batch();
      if (mllog_) log::log_bert_eval_start(*mllog_, samples_seen);
      const double metric = evaluate(done, 0);
      if (mllog_) {
        log::log_bert_eval_stop(*mllog_, samples_seen, metric);
        track_stats(done);
        log::log_bert_block_stop(*mllog_, block_first_samples_);
      }
      block_open_ = false;
      if (reached(metric, done)) return true;
    }
    if (done % c_.cadence.save_interval == 0 || done == last_step_) save_all(done);
    return false;
  }
  if (done % steps_per_epoch_ != 0) {
    if (done == last_step_) save_all(done);  // stopped inside an epoch (--exit-interval): a resumed run continues from here
    return false;
  }
  const int64_t epoch = done / steps_per_epoch_;
  result_.epochs = epoch;
  if (mllog_) {
    track_stats(done);
    log::log_resnet_epoch_stop(*mllog_, epoch);
  }
  const bool eval_now = c_.benchmark == 0 && c_.cadence.evaluates_after_epoch(epoch, total_epochs_);
  if (eval_now) {
    const double metric = evaluate(done, epoch);
    if (mllog_) log::log_resnet_eval(*mllog_, epoch, metric);
    if (reached(metric, done)) return true;
  }
  if (epoch % c_.cadence.save_interval == 0 || done == last_step_) save_all(done);
  return false;
}

double TrainingLoop::evaluate(int64_t done, int64_t epoch) {
  const LongerWaits waits(communicators(), c_.save_timeout);
  clear_progress();
  const double metric = recipe_.evaluate(done, epoch, sinks_);
  result_.evals.push_back(metric);
  return metric;
}

bool TrainingLoop::reached(double metric, int64_t done) {
  if (metric < c_.target) return false;
  result_.reached_target = true;
  console_ << (epochs_ ? fmt::format("target {} {} reached after epoch {}\n", recipe_.metric_name(), c_.target,
                                     done / steps_per_epoch_)
                       : fmt::format("target {} {} reached at step {} ({} samples)\n", recipe_.metric_name(),
                                     c_.target, done, done * dp_.global_batch()));
  if (mllog_) log::log_run_stop(*mllog_, true);
  save_all(done);
  return true;
}

// Loss scale and skipped steps in the MLPerf log: only when a run has either, so the logs of
// plain runs keep their content.
void TrainingLoop::track_stats(int64_t done) {
  const int64_t skipped = skipped_before_ + result_.skipped_steps;
  if (mllog_ && (scaler_.enabled() || skipped > 0))
    mllog_->event(log::key::kTrackedStats, {{"loss_scale", scaler_.scale()}, {"skipped_steps", skipped}},
                  {{"step", done}});
}

nlohmann::json TrainingLoop::checkpoint_meta(int64_t step) const {
  nlohmann::json meta;
  meta["step"] = step;
  meta["optimizer_steps"] = optimizer_.steps_taken();
  meta["skipped_steps"] = skipped_before_ + result_.skipped_steps;
  meta["target_reached"] = result_.reached_target;
  meta["kiln_version"] = KILN_VERSION;
  if (!run_id_.is_null()) meta["run_id"] = run_id_;
  if (scaler_.enabled()) meta["loss_scaler"] = scaler_.state();
  recipe_.add_meta(meta);
  add_run_settings(meta, c_.settings);
  for (auto& [key, value] : c_.resolved) meta["config"][key] = value;
  return meta;
}

void TrainingLoop::save(int64_t step) {
  if (!sinks_.saves_checkpoints()) return;
  if (sharded_) dp_.gather_state(ctx_, store_, optimizer_.state(), whole_state_);
  // Model-parallel: data-parallel rank 0's replica sends its parts to rank 0, which writes them whole.
  WholeModel whole;
  if (model_parallel_ && state_.groups->layout.dp_rank == 0) {
    host_.pull();  // the parts travel from the host copies of state on a device
    whole = gather_whole_model(host_.store(), host_.optimizer(), *state_.groups->model);
  }
  io::CheckpointManager* checkpoints = sinks_.checkpoints();
  if (!checkpoints) return;
  test_slow_save();
  clear_progress();
  nlohmann::json meta = checkpoint_meta(step);
  if (mllog_) {
    // A run resumed from this checkpoint cuts the log back to here and continues it.
    const log::MlLogPosition at = mllog_->position();
    meta["mllog"] = {{"file", mllog_->path().filename().string()}, {"bytes", at.bytes}, {"crc32c", at.crc32c}};
    mllog_->start(log::key::kCheckpointStart, nullptr, {{"step_num", step}});
  }
  if (!model_parallel_) host_.pull();
  result_.checkpoint = model_parallel_ ? checkpoints->save(step, whole.model, whole.optimizer, meta)
                                       : checkpoints->save(step, host_.store(), host_.optimizer(), meta, host_.buffers());
  if (mllog_) mllog_->end(log::key::kCheckpointStop, nullptr, {{"step_num", step}});
  console_ << fmt::format("saved checkpoint {}\n", result_.checkpoint.string());
}

// Only rank 0 saves; the others wait for it, so that an error on another rank cannot end rank 0
// (MPI_Abort) in the middle of writing the checkpoint.
void TrainingLoop::save_all(int64_t step) {
  const LongerWaits waits(communicators(), c_.save_timeout);
  rank_failure_.at_save(dp_.rank(), step);
  hold_whole_state(sinks_.saves_checkpoints());
  save(step);
  hold_whole_state(false);
  if (model_parallel_) state_.groups->model->barrier();  // with the dp barrier: every rank waits for rank 0
  if (dp_.ranks() > 1) dp_.barrier();
}

}  // namespace kiln::train
