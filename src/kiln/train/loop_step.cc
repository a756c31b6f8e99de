// train/loop_step.cc — one training step of TrainingLoop: the micro-batches' forward and
// backward, the sums across ranks, then the optimizer step or a counted skip.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "kiln/backend/backend.h"
#include "kiln/backend/profile.h"
#include "kiln/core/error.h"
#include "kiln/log/submission.h"
#include "kiln/train/pipeline_schedule.h"
#include "kiln/train/training_loop.h"

namespace kiln::train {

// This rank's micro-batch `micro` of the step; its scratch starts empty (scratch never outlives an op).
Step TrainingLoop::make_step(int64_t step, int64_t micro) {
  state_.run.scratch.reset();
  Step s;
  s.ctx = &ctx_;
  s.seed = uint64_t(c_.seed);
  const int64_t slot = dp_.slot(micro);
  s.index = uint64_t(step * slots_ + slot);
  s.training = true;
  s.sample_offset = uint64_t(step * dp_.global_batch() + slot * dp_.micro_batch());
  s.sample_offset_tensor = sample_offsets_[recipe_.pipeline() ? size_t(micro) : 0];
  s.compute_dtype = store_.compute_dtype();
  if (buckets_ && micro == accumulation_ - 1) s.grad_watch = &*buckets_;
  s.capture_regions = graph_plan_.capture_layers;
  return s;
}

void TrainingLoop::write_sample_offset(const Step& s) {
  int64_t offset = int64_t(s.sample_offset);
  Tensor offset_tensor = s.sample_offset_tensor;
  ops::staged_copy(ctx_, Tensor::view(&offset, {1}, DType::i64), offset_tensor, offset_staging_);
}

Tensor& micro_batch_slot(std::vector<Tensor>& slots, int64_t micro, Context& ctx, int64_t numel) {
  while (int64_t(slots.size()) <= micro) slots.push_back(Tensor::empty({numel}, DType::i64, ctx.device));
  return slots[size_t(micro)];
}

void MicroBatchLosses::add(const MicroBatchLosses& out, int64_t slots) {
  loss += out.loss / double(slots);
  for (size_t i = 0; i < parts.size() && i < out.parts.size(); ++i) parts[i] += out.parts[i] / double(slots);
  correct += out.correct;
  count += out.count;
}

MicroBatchLosses::Values MicroBatchLosses::values() const {
  Values v = {loss, double(correct), double(count)};
  for (double part : parts) v.push_back(part);
  return v;
}

void MicroBatchLosses::set_values(const Values& v) {
  loss = v[0];
  correct = int64_t(v[1]);
  count = int64_t(v[2]);
  std::copy(v.begin() + 3, v.end(), parts.begin());
}

MicroBatchLosses TrainingLoop::forward_backward(int64_t step, float grad_scale, double& data_seconds) {
  if (PipelineStage* stage = recipe_.pipeline()) {
    const PipelineStepResult r = run_pipeline_step(*stage, *state_.groups->pp, accumulation_, slots_, grad_scale,
                                                   names_.size(), pipeline_reuse_, [&](int64_t micro) {
                                                     const Step s = make_step(step, micro);
                                                     write_sample_offset(s);
                                                     return s;
                                                   });
    data_seconds = r.data_seconds;
    return r.sum;
  }
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    const Step s = make_step(step, micro);
    Timer data_timer;
    recipe_.load(s);
    data_seconds += data_timer.seconds();
    write_sample_offset(s);
    recipe_.forward_backward(s, micro, grad_scale);
  }
  MicroBatchLosses sum;
  sum.parts.assign(names_.size(), 0.0);
  for (int64_t micro = 0; micro < accumulation_; ++micro) sum.add(recipe_.read_losses(micro), slots_);
  return sum;
}

// Gradients (whole, in buckets, or reduce-scattered to shards), losses and counters over the ranks.
void TrainingLoop::reduce_across_ranks(MicroBatchLosses& sum) {
  if (sharded_) dp_.reduce_scatter_gradients(store_, ctx_);
  else if (buckets_) buckets_->finish();
  else dp_.reduce_gradients(store_);
  MicroBatchLosses::Values totals = sum.values();
  dp_.reduce(totals);
  sum.set_values(totals);
}

StepOutcome TrainingLoop::train_step(int64_t step) {
  Timer step_timer;
  ops::set_profile_recording(profiling_ && step > start_step_);
  StepOutcome o;
  store_.clear_grads();
  o.sum = forward_backward(step, float(scaler_.scale()) / float(slots_), o.data_seconds);
  store_.settle_grads();
  if (dp_.ranks() > 1) {
    Timer comm_timer;
    reduce_across_ranks(o.sum);
    o.comm_seconds = comm_timer.seconds();
  }
  o.advanced = update(step + 1, o.sum);
  o.seconds = step_timer.seconds();
  ops::set_profile_recording(false);
  if (profiling_ && step > start_step_) profiled_seconds_ += o.seconds, ++profiled_steps_;
  return o;
}

// Unscale, the global gradient norm, then the optimizer step with clipping folded in; a
// non-finite loss or norm skips instead. The decisions are taken on the device (the step's
// scalars) and read back once, after the update.
bool TrainingLoop::update(int64_t done, const MicroBatchLosses& sum) {
  if (inject_nan_.at(done)) {  // test hook: one gradient element becomes NaN
    Tensor first = Tensor::view(store_.grads.data, {1}, store_.grads.dtype, store_.grads.device);
    ops::fill(ctx_, first, std::numeric_limits<float>::quiet_NaN());
  }
  lr_ = state_.schedule.lr(optimizer_.steps_taken());  // skipped steps do not advance it
  optim::StepInputs in;
  in.lr = lr_;
  in.unscale = 1.0 / scaler_.scale();
  in.max_norm = std::max(c_.clip_grad, 0.0);
  in.loss = sum.loss;
  optimizer_.set_inputs(in);
  step_scalars_.write(in);
  run_update_ops();
  const optim::StepDecision decision = step_scalars_.read();
  if (decision.skipped) {
    skip(done, sum.loss, decision.norm);
    return false;
  }
  optimizer_.count_step();
  scaler_.update(false);
  consecutive_hopeless_ = 0;
  last_grad_norm_ = decision.norm;
  return true;
}

void TrainingLoop::run_update_ops() {
  update_graph_.run(ctx_, graph_plan_.capture, {}, nullptr, [this] {
    Tensor& scalars = step_scalars_.device();
    if (scaler_.enabled()) ops::scale_by_step_scalar(ctx_, store_.grads, scalars, ops::kStepUnscale);
    grad_norm_.sum_squares(scalars, norm_groups_);
    ops::step_decide(ctx_, scalars);
    optimizer_.update(scalars);
    if (sharded_) dp_.gather_weights(store_);  // unchanged weights when skipped
    return Tensor{};
  });
}

namespace {
// A NaN as the console prints it: "nan", whatever its sign bit (x86 makes "-nan" of inf - inf).
double unsigned_nan(double x) { return std::isnan(x) ? std::fabs(x) : x; }
}  // namespace

// Megatron: skipped iterations advance the iteration and the data, not the schedule.
void TrainingLoop::skip(int64_t done, double loss, double grad_norm) {
  const bool hopeless = !scaler_.can_lower();
  ++result_.skipped_steps;
  ++interval_.skipped;
  if (!std::isfinite(loss)) {
    ++result_.nan_steps;
    ++interval_.nan;
  }
  scaler_.update(true);
  consecutive_hopeless_ = hopeless ? consecutive_hopeless_ + 1 : 0;
  last_grad_norm_.reset();
  clear_progress();
  console_ << fmt::format("warning: step {}: skipped, {} is not finite (loss {}, gradient norm {}); {} "
                          "step{} skipped so far{}\n",
                          done, std::isfinite(loss) ? "the gradient norm" : "the loss", unsigned_nan(loss),
                          unsigned_nan(grad_norm),
                          result_.skipped_steps, result_.skipped_steps == 1 ? "" : "s",
                          scaler_.dynamic() ? fmt::format(", loss scale now {}", scaler_.scale()) : "");
  if (c_.max_skipped_steps > 0 && consecutive_hopeless_ >= c_.max_skipped_steps) {
    if (mllog_) log::log_run_stop(*mllog_, false);
    if (tensorboard_) tensorboard_->flush();
    throw Error("step {}: {} consecutive steps skipped for a non-finite loss or gradient norm "
                "(--max-skipped-steps {}); stopping with the last checkpoint {}; lower the "
                "learning rate or check the data",
                done, consecutive_hopeless_, c_.max_skipped_steps,
                result_.checkpoint.empty() ? std::string("(none written by this run)")
                                           : result_.checkpoint.string());
  }
}

}  // namespace kiln::train
