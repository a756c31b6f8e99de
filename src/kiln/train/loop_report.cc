// train/loop_report.cc — what TrainingLoop says after a step: the console line every
// log_interval steps (kiln's or Megatron's format), a progress line with ETA in between on a
// terminal, TensorBoard scalars.
#include <fmt/format.h>

#include <cmath>

#include "kiln/train/run_report.h"
#include "kiln/train/training_loop.h"

namespace kiln::train {

namespace {

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = int64_t(seconds);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace

void TrainingLoop::record(int64_t done, const StepOutcome& o) {
  step_seconds_.push_back(o.seconds);
  result_.losses.push_back(o.sum.loss);
  if (sinks_.is_rank0()) loss_log_.add(done, o.sum.loss);
  result_.steps = done;
  interval_.data += o.data_seconds;
  interval_.compute += o.seconds - o.data_seconds - o.comm_seconds;
  interval_.comm += o.comm_seconds;
  ++interval_.iterations;
  if (!o.advanced) return;
  IntervalLosses& l = interval_.losses;
  ++l.steps;
  l.loss += o.sum.loss;
  for (size_t i = 0; i < o.sum.parts.size(); ++i) l.parts[i] += o.sum.parts[i];
  l.correct += o.sum.correct;
  l.count += o.sum.count;
  l.last_loss = o.sum.loss;
}

log::NamedLosses TrainingLoop::named(const LossParts& values, double divisor) const {
  log::NamedLosses l;
  for (size_t i = 0; i < names_.size(); ++i) l.emplace_back(names_[i], values[i] / divisor);
  return l;
}

void TrainingLoop::report(int64_t done, const StepOutcome& o) {
  log::MegatronTrainLog mlog;
  mlog.iteration = done;
  mlog.train_iters = c_.total_steps;
  mlog.consumed_samples = done * dp_.global_batch();
  mlog.learning_rate = lr_;
  mlog.global_batch_size = dp_.global_batch();
  mlog.grad_norm = last_grad_norm_;
  mlog.loss_scale = scaler_.scale();
  if (tensorboard_ && o.advanced) {
    mlog.losses = named(o.sum.parts, 1.0);
    log::write_megatron_train_scalars(*tensorboard_, mlog);
  }
  const bool epoch_closes = epochs_ && done % steps_per_epoch_ == 0;
  if (done % c_.log_interval != 0 && done != last_step_ && !epoch_closes) {
    if (c_.progress) show_progress(done);
    return;
  }
  clear_progress();
  const double elapsed = interval_.timer.seconds();
  if (c_.megatron_log) {
    const double n = double(interval_.iterations);
    const IntervalLosses& l = interval_.losses;
    mlog.losses = l.steps ? named(l.parts, double(l.steps)) : log::NamedLosses{};
    mlog.elapsed_ms_per_iteration = 1e3 * elapsed / n;
    mlog.tflops_per_device = recipe_.flops_per_sample() * n * double(dp_.global_batch()) / elapsed / 1e12;
    mlog.skipped_iterations = interval_.skipped;
    mlog.nan_iterations = interval_.nan;
    console_ << log::megatron_train_line(mlog) << "\n";
  } else {
    console_ << console_line(done, elapsed) << "\n";
  }
  console_.flush();
  interval_ = Interval{};
  interval_.losses.parts.assign(names_.size(), 0.0);
}

std::string TrainingLoop::console_line(int64_t done, double elapsed) const {
  const double n = double(interval_.iterations);
  const double samples = n * double(dp_.global_batch());
  const std::string prefix = epochs_ ? fmt::format("epoch {:>3} ", (done - 1) / steps_per_epoch_ + 1) : "";
  const std::string norm = last_grad_norm_ ? fmt::format("{:.3f}", *last_grad_norm_) : "-";
  const std::string scaling = scaler_.enabled() ? fmt::format(" | loss scale {:.1f}", scaler_.scale()) : "";
  const std::string skipped =
      result_.skipped_steps > 0 || scaler_.enabled() ? fmt::format(" | skipped {}", result_.skipped_steps) : "";
  const std::string comm =
      dp_.ranks() > 1 ? fmt::format(", comm {:.1f} ms ({} ranks)", 1e3 * interval_.comm / n, dp_.ranks()) : "";
  return fmt::format(
      "{}step {:>6}/{} | {} | lr {:.3e} | grad norm {}{}{} | data {:.1f} ms, compute {:.1f} ms{} | "
      "{:.1f} {}/s | {:.1f} GFLOP/s | {}",
      prefix, done, c_.total_steps, recipe_.loss_text(interval_.losses), lr_, norm, scaling, skipped,
      1e3 * interval_.data / n, 1e3 * interval_.compute / n, comm, samples / elapsed, recipe_.sample_unit(),
      recipe_.flops_per_sample() * samples / dp_.ranks() / interval_.compute / 1e9, memory_text(memory_use()));
}

void TrainingLoop::show_progress(int64_t done) {
  const double per_step = run_timer_.seconds() / double(done - start_step_);
  const int64_t left = last_step_ - done;
  const int width = 30;
  const int filled = int(double(width) * double(done) / double(std::max<int64_t>(1, last_step_)));
  console_ << fmt::format("\r[{}{}] step {}/{} | {:.1f} s/step | ETA {}", std::string(size_t(filled), '#'),
                          std::string(size_t(width - filled), '.'), done, last_step_, per_step,
                          duration_text(per_step * double(left)));
  console_.flush();
  progress_shown_ = true;
}

void TrainingLoop::clear_progress() {
  if (progress_shown_) console_ << "\r\033[K";
  progress_shown_ = false;
}

}  // namespace kiln::train
