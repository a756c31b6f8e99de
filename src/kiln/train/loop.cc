#include "kiln/train/loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/backend/profile.h"
#include "kiln/core/cpu_features.h"
#include "kiln/core/error.h"
#include "kiln/core/timer.h"
#include "kiln/log/bert_mllog.h"
#include "kiln/log/mllog_keys.h"
#include "kiln/log/resnet_mllog.h"
#include "kiln/log/submission.h"
#include "kiln/optim/grad_norm.h"
#include "kiln/train/data_parallel.h"
#include "kiln/train/device_state.h"
#include "kiln/train/grad_buckets.h"
#include "kiln/train/pipeline_schedule.h"
#include "kiln/train/run_report.h"
#include "kiln/train/test_hooks.h"
#include "kiln/train/whole_model.h"

namespace kiln::train {

namespace {

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = int64_t(seconds);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string scale_text(double scale) { return fmt::format("{:.1f}", scale); }

// --overlap-grad-reduce: the buckets that reduce the gradients during backward, where they can;
// says once how the gradients are reduced when overlap was asked for.
std::optional<GradBuckets> overlapped_buckets(const LoopConfig& c, const DataParallel& dp, dist::Communicator& comm,
                                              ParamStore& store, std::ostream& console) {
  if (!c.ddp.overlap_grad_reduce || dp.ranks() == 1) return std::nullopt;
  if (c.distributed_optimizer) {
    console << "--overlap-grad-reduce: with the distributed optimizer the gradients are reduce-scattered after "
               "backward (no buckets)\n";
    return std::nullopt;
  }
  const int64_t elements = c.ddp.bucket_size > 0 ? c.ddp.bucket_size : default_bucket_elements(dp.ranks());
  std::optional<GradBuckets> buckets(std::in_place, comm, store, elements);
  console << fmt::format("gradient buckets: {} of >= {} elements, {}\n", buckets->buckets().size(), elements,
                         comm.can_overlap() ? "each all-reduced during backward as soon as its gradients are final"
                                            : "all-reduced in turn after backward (MPI without "
                                              "MPI_THREAD_MULTIPLE: no overlap)");
  return buckets;
}

}  // namespace

RunContext::RunContext(Device device) : scratch(device), ctx(device_context(device)) { ctx.scratch = &scratch; }

LoopResult run_training(const LoopConfig& c, Recipe& recipe, TrainState state, Sinks& sinks,
                        const ResumePoint& resume) {
  std::ostream& console = sinks.console();
  log::MlLogger* mllog = sinks.mllog();
  log::TensorBoardWriter* tensorboard = sinks.tensorboard();
  ParamStore& store = state.store;
  optim::Optimizer& optimizer = state.optimizer;
  RunContext& run = state.run;
  Context& ctx = run.ctx;
  const bool epochs = c.cadence.kind == Cadence::Kind::epochs;
  const int64_t steps_per_epoch = std::max<int64_t>(1, c.cadence.steps_per_epoch);
  const int64_t total_epochs = c.total_steps / steps_per_epoch;
  KILN_CHECK(c.global_batch % c.micro_batch == 0, "training loop: global batch {} is not a multiple of micro batch {}",
             c.global_batch, c.micro_batch);
  DataParallel dp(state.comm, c.global_batch, c.micro_batch);
  const int64_t accumulation = dp.micro_batches_per_rank();
  const int64_t slots = dp.slots();  // micro-batches per global batch, all ranks together
  optim::LossScaler scaler(c.loss_scaler);
  const NanInjection inject_nan = test_nan_injection();
  const RankFailure rank_failure = test_rank_failure();
  LossLog loss_log;

  // Checkpoints hold the optimizer state with the store's layout: a sharded optimizer's (ZeRO-1)
  // is gathered into whole buffers to save, and loaded whole, then each rank keeps its shard.
  const bool sharded = c.distributed_optimizer && dp.ranks() > 1;
  std::vector<Tensor> whole_state;
  auto flat_state = [&] {
    std::vector<io::FlatState> flat;
    const std::vector<optim::NamedState> named = optimizer.state();
    for (size_t i = 0; i < named.size(); ++i)
      flat.emplace_back(named[i].name, sharded ? &whole_state[i] : named[i].data);
    return flat;
  };
  if (sharded)
    for (size_t i = 0; i < optimizer.state().size(); ++i) whole_state.push_back(Tensor::empty({store.padded_size()}));
  const std::vector<io::FlatState> opt_state = flat_state();
  HostStaging host(ctx, store, opt_state, state.buffers);  // checkpoints of a model on a device

  LoopResult result;
  int64_t start_step = 0;
  int64_t skipped_before = 0;  // by the processes this run resumed from
  if (resume.checkpoint) {
    const io::CheckpointMeta& meta = *resume.checkpoint;
    host.pull();  // what the checkpoint does not replace keeps its value
    io::load_checkpoint(meta.dir(), host.store(),
                        resume.loads_optimizer() ? host.optimizer() : std::vector<io::FlatState>{}, host.buffers());
    host.push();
    if (sharded && resume.loads_optimizer()) dp.scatter_state(store, whole_state, optimizer.state());
    if (resume.continues_run()) {
      start_step = meta.integer("step");
      skipped_before = meta.integer("skipped_steps");
      if (resume.loads_optimizer()) {
        optimizer.set_steps_taken(meta.integer("optimizer_steps"));
        if (meta.contains("loss_scaler")) scaler.load_state(meta.at("loss_scaler"));
      } else {
        console << "--no-load-optim: the optimizer starts fresh (moments, step count, learning-rate schedule)\n";
      }
      recipe.resume(meta, start_step, sinks);
    } else {
      console << fmt::format("--finetune: loaded the weights of {}; starting at step 0 with a fresh optimizer\n",
                             meta.dir().string());
    }
  }
  result.steps = start_step;
  result.epochs = epochs ? start_step / steps_per_epoch : 0;
  if (dp.ranks() > 1) dp.broadcast_weights(store);
  store.refresh_compute();  // the compute copy follows the (initialised or restored) weights
  io::CheckpointManager* checkpoints = sinks.checkpoints();
  if (resume.continues_run() && resume.checkpoint->boolean("target_reached")) {
    result.reached_target = true;  // its MLPerf log already ends with run_stop
    console << fmt::format("the run reached its target at step {}: nothing left to train\n", start_step);
    return result;
  }
  if (mllog && !resume.continues_run() && !c.run_started) log::log_run_start(*mllog);

  console << recipe.start_line(start_step);
  if (sharded)
    console << fmt::format("distributed optimizer (ZeRO-1): each of {} ranks updates and keeps the state of {} of "
                           "the {} parameter elements\n",
                           dp.ranks(), dp.shard(store).size, store.size());
  std::optional<GradBuckets> buckets = overlapped_buckets(c, dp, state.comm, store, console);
  console << (ctx.device.kind == DeviceKind::cuda
                  ? fmt::format("precision: {} on {} (cuBLASLt / cuDNN, f32 accumulation{})", dtype_name(c.compute_dtype),
                                ctx.device.str(), c.compute_dtype == DType::f32 ? ", no TF32" : "")
                  : precision_note(c.compute_dtype, cpu_features()))
          << (scaler.enabled() ? fmt::format("; loss scaling {}", scaler.describe()) : std::string())
          << "\n";
  console.flush();

  // ---- progress line (terminals only) ----
  bool progress_shown = false;
  auto clear_progress = [&] {
    if (progress_shown) console << "\r\033[K";
    progress_shown = false;
  };

  const bool model_parallel = state.groups && state.groups->model_parallel();
  // Gradient norms sum over the ranks holding other parts of the gradients: the model-parallel
  // group, and the data-parallel ranks' shards under a sharded optimizer.
  std::vector<dist::Communicator*> norm_groups;
  if (model_parallel) norm_groups.push_back(state.groups->model.get());
  if (sharded) norm_groups.push_back(&state.comm);
  auto save = [&](int64_t step) {
    if (!sinks.saves_checkpoints()) return;
    if (sharded) dp.gather_state(optimizer.state(), whole_state);
    // Model-parallel: data-parallel rank 0's replica sends its parts to rank 0, which writes them whole.
    WholeModel whole;
    if (model_parallel && state.groups->layout.dp_rank == 0)
      whole = gather_whole_model(store, opt_state, *state.groups->model);
    if (!checkpoints) return;
    clear_progress();
    nlohmann::json meta;
    meta["step"] = step;
    meta["optimizer_steps"] = optimizer.steps_taken();
    meta["skipped_steps"] = skipped_before + result.skipped_steps;
    meta["target_reached"] = result.reached_target;
    meta["kiln_version"] = KILN_VERSION;
    if (scaler.enabled()) meta["loss_scaler"] = scaler.state();
    recipe.add_meta(meta);
    add_run_settings(meta, c.settings);
    for (auto& [key, value] : c.resolved) meta["config"][key] = value;
    if (mllog) {
      // A run resumed from this checkpoint cuts the log back to here and continues it.
      const log::MlLogPosition at = mllog->position();
      meta["mllog"] = {{"file", mllog->path().filename().string()}, {"bytes", at.bytes}, {"crc32c", at.crc32c}};
      mllog->start(log::key::kCheckpointStart, nullptr, {{"step_num", step}});
    }
    host.pull();
    result.checkpoint = model_parallel ? checkpoints->save(step, whole.model, whole.optimizer, meta)
                                       : checkpoints->save(step, host.store(), host.optimizer(), meta, host.buffers());
    if (mllog) mllog->end(log::key::kCheckpointStop, nullptr, {{"step_num", step}});
    console << fmt::format("saved checkpoint {}\n", result.checkpoint.string());
  };
  // Only rank 0 saves; the others wait for it, so that an error on another rank cannot end rank 0
  // (MPI_Abort) in the middle of writing the checkpoint.
  auto save_all = [&](int64_t step) {
    save(step);
    if (model_parallel) state.groups->model->barrier();  // with the dp barrier: every rank waits for rank 0
    if (dp.ranks() > 1) dp.barrier();
  };
  auto evaluate = [&](int64_t done, int64_t epoch) {
    clear_progress();
    const double metric = recipe.evaluate(done, epoch, sinks);
    result.evals.push_back(metric);
    return metric;
  };
  // Loss scale and skipped steps in the MLPerf log: only when a run has either, so the logs of
  // plain runs keep their content.
  auto track_stats = [&](int64_t done) {
    const int64_t skipped = skipped_before + result.skipped_steps;
    if (mllog && (scaler.enabled() || skipped > 0))
      mllog->event(log::key::kTrackedStats, {{"loss_scale", scaler.scale()}, {"skipped_steps", skipped}},
                   {{"step", done}});
  };
  auto reached = [&](double metric, int64_t done) {
    if (metric < c.target) return false;
    result.reached_target = true;
    console << (epochs ? fmt::format("target {} {} reached after epoch {}\n", recipe.metric_name(), c.target,
                                     done / steps_per_epoch)
                       : fmt::format("target {} {} reached at step {} ({} samples)\n", recipe.metric_name(),
                                     c.target, done, done * c.global_batch));
    if (mllog) log::log_run_stop(*mllog, true);
    save_all(done);
    return true;
  };

  int64_t last_step = c.benchmark > 0 ? std::min(c.total_steps, start_step + c.benchmark) : c.total_steps;
  if (c.exit_interval > 0) last_step = std::min(last_step, c.exit_interval);
  if (!epochs && c.cadence.eval_at_start && c.benchmark == 0) evaluate(start_step, 0);

  const std::vector<std::string> names = recipe.loss_names();
  std::vector<double> step_seconds;
  Timer interval_timer, run_timer;
  double interval_data = 0, interval_compute = 0, interval_comm = 0;  // seconds; comm: waiting on other ranks too
  IntervalLosses interval;
  interval.parts.assign(names.size(), 0.0);
  int64_t interval_iterations = 0, interval_skipped = 0, interval_nan = 0;
  int64_t consecutive_hopeless = 0;
  std::optional<double> last_grad_norm;
  double lr = 0;
  const bool profiling = ops::profile_requested();  // KILN_PROFILE: every step after the first
  double profiled_seconds = 0;
  int64_t profiled_steps = 0;

  // MLPerf blocks open before their first step. A run resumed inside a block (or epoch) continues
  // the one its log holds.
  const int64_t block_samples = c.cadence.eval_interval * c.global_batch;
  bool block_open = !epochs && start_step % c.cadence.eval_interval != 0;
  int64_t block_first_samples = start_step / c.cadence.eval_interval * c.cadence.eval_interval * c.global_batch;

  for (int64_t step = start_step; step < last_step; ++step) {
    if (!epochs && !block_open) {
      block_first_samples = step * c.global_batch;
      if (mllog) log::log_bert_block_start(*mllog, block_first_samples, block_samples);
      block_open = true;
    }
    if (epochs && mllog && step % steps_per_epoch == 0) log::log_resnet_epoch_start(*mllog, step / steps_per_epoch + 1);
    rank_failure.at(state.comm.rank(), step + 1);
    Timer step_timer;
    ops::set_profile_recording(profiling && step > start_step);
    double data_seconds = 0;
    store.zero_grad();
    const float grad_scale = float(scaler.scale()) / float(slots);
    // This rank's micro-batch `micro` of the step; its scratch starts empty (scratch never outlives an op).
    auto make_step = [&](int64_t micro) {
      run.scratch.reset();
      Step s;
      s.ctx = &ctx;
      s.seed = uint64_t(c.seed);
      const int64_t slot = dp.slot(micro);
      s.index = uint64_t(step * slots + slot);
      s.training = true;
      s.sample_offset = uint64_t(step * c.global_batch + slot * c.micro_batch);
      s.compute_dtype = c.compute_dtype;
      if (buckets && micro == accumulation - 1) s.grad_watch = &*buckets;
      return s;
    };
    MicroBatchLosses sum;
    sum.parts.assign(names.size(), 0.0);
    if (PipelineStage* stage = recipe.pipeline()) {
      const PipelineStepResult r =
          run_pipeline_step(*stage, *state.groups->pp, accumulation, slots, grad_scale, names.size(), make_step);
      sum = r.sum;
      data_seconds = r.data_seconds;
    } else {
      for (int64_t micro = 0; micro < accumulation; ++micro) {
        const Step s = make_step(micro);
        Timer data_timer;
        recipe.load(s);
        data_seconds += data_timer.seconds();
        const MicroBatchLosses out = recipe.forward_backward(s, grad_scale);
        sum.loss += out.loss / double(slots);
        for (size_t i = 0; i < sum.parts.size() && i < out.parts.size(); ++i)
          sum.parts[i] += out.parts[i] / double(slots);
        sum.correct += out.correct;
        sum.count += out.count;
      }
    }
    Timer comm_timer;
    if (dp.ranks() > 1) {
      if (sharded) dp.reduce_scatter_gradients(store, ctx);
      else if (buckets) buckets->finish();
      else dp.reduce_gradients(store);
      std::vector<double> totals = {sum.loss, double(sum.correct), double(sum.count)};
      totals.insert(totals.end(), sum.parts.begin(), sum.parts.end());
      dp.reduce(totals);
      sum.loss = totals[0];
      sum.correct = int64_t(totals[1]);
      sum.count = int64_t(totals[2]);
      std::copy(totals.begin() + 3, totals.end(), sum.parts.begin());
    }
    const double comm_seconds = dp.ranks() > 1 ? comm_timer.seconds() : 0.0;
    const int64_t done = step + 1;
    if (inject_nan.at(done)) {  // test hook: one gradient element becomes NaN
      Tensor first = Tensor::view(store.grads.data, {1}, store.grads.dtype, store.grads.device);
      ops::fill(ctx, first, std::numeric_limits<float>::quiet_NaN());
    }
    if (scaler.enabled() && scaler.scale() != 1.0) optim::scale_grads(store, float(1.0 / scaler.scale()), ctx);
    const double grad_norm = optim::global_grad_norm(store, ctx, norm_groups);
    lr = state.schedule.lr(optimizer.steps_taken());  // skipped steps do not advance it
    const bool finite = std::isfinite(sum.loss) && std::isfinite(grad_norm);
    if (finite) {
      const bool clip = c.clip_grad > 0 && grad_norm > c.clip_grad;
      optimizer.step(float(lr), clip ? float(c.clip_grad / grad_norm) : 1.0f);
      if (sharded) dp.gather_weights(store);
      scaler.update(false);
      consecutive_hopeless = 0;
      last_grad_norm = grad_norm;
    } else {
      // Megatron: skipped iterations advance the iteration and the data, not the schedule.
      const bool hopeless = !scaler.can_lower();
      ++result.skipped_steps;
      ++interval_skipped;
      if (!std::isfinite(sum.loss)) {
        ++result.nan_steps;
        ++interval_nan;
      }
      scaler.update(true);
      consecutive_hopeless = hopeless ? consecutive_hopeless + 1 : 0;
      last_grad_norm.reset();
      clear_progress();
      console << fmt::format("warning: step {}: skipped, {} is not finite (loss {}, gradient norm {}); {} "
                             "step{} skipped so far{}\n",
                             done, std::isfinite(sum.loss) ? "the gradient norm" : "the loss", sum.loss,
                             grad_norm, result.skipped_steps, result.skipped_steps == 1 ? "" : "s",
                             scaler.dynamic() ? fmt::format(", loss scale now {}", scaler.scale()) : "");
      if (c.max_skipped_steps > 0 && consecutive_hopeless >= c.max_skipped_steps) {
        if (mllog) log::log_run_stop(*mllog, false);
        if (tensorboard) tensorboard->flush();
        throw Error("step {}: {} consecutive steps skipped for a non-finite loss or gradient norm "
                    "(--max-skipped-steps {}); stopping with the last checkpoint {}; lower the "
                    "learning rate or check the data",
                    done, consecutive_hopeless, c.max_skipped_steps,
                    result.checkpoint.empty() ? std::string("(none written by this run)")
                                              : result.checkpoint.string());
      }
    }
    const double seconds = step_timer.seconds();
    ops::set_profile_recording(false);
    if (profiling && step > start_step) profiled_seconds += seconds, ++profiled_steps;
    step_seconds.push_back(seconds);
    result.losses.push_back(sum.loss);
    if (sinks.is_rank0()) loss_log.add(done, sum.loss);
    result.steps = done;
    interval_data += data_seconds;
    interval_compute += seconds - data_seconds - comm_seconds;
    interval_comm += comm_seconds;
    ++interval_iterations;
    if (finite) {
      ++interval.steps;
      interval.loss += sum.loss;
      for (size_t i = 0; i < sum.parts.size(); ++i) interval.parts[i] += sum.parts[i];
      interval.correct += sum.correct;
      interval.count += sum.count;
      interval.last_loss = sum.loss;
    }

    log::MegatronTrainLog mlog;
    mlog.iteration = done;
    mlog.train_iters = c.total_steps;
    mlog.consumed_samples = done * c.global_batch;
    mlog.learning_rate = lr;
    mlog.global_batch_size = c.global_batch;
    mlog.grad_norm = last_grad_norm;
    mlog.loss_scale = scaler.scale();
    auto named = [&](const std::vector<double>& values, double divisor) {
      log::NamedLosses l;
      for (size_t i = 0; i < names.size(); ++i) l.emplace_back(names[i], values[i] / divisor);
      return l;
    };
    if (tensorboard && finite) {
      mlog.losses = named(sum.parts, 1.0);
      log::write_megatron_train_scalars(*tensorboard, mlog);
    }
    const bool epoch_closes = epochs && done % steps_per_epoch == 0;
    if (done % c.log_interval == 0 || done == last_step || epoch_closes) {
      clear_progress();
      const double elapsed = interval_timer.seconds();
      const double n = double(interval_iterations);
      const double samples = n * double(c.global_batch);
      if (c.megatron_log) {
        const double advanced = double(std::max<int64_t>(1, interval.steps));
        mlog.losses = interval.steps ? named(interval.parts, advanced) : log::NamedLosses{};
        mlog.elapsed_ms_per_iteration = 1e3 * elapsed / n;
        mlog.tflops_per_device = recipe.flops_per_sample() * samples / elapsed / 1e12;
        mlog.skipped_iterations = interval_skipped;
        mlog.nan_iterations = interval_nan;
        console << log::megatron_train_line(mlog) << "\n";
      } else {
        const std::string prefix = epochs ? fmt::format("epoch {:>3} ", step / steps_per_epoch + 1) : "";
        const std::string norm = last_grad_norm ? fmt::format("{:.3f}", *last_grad_norm) : "-";
        const std::string scaling = scaler.enabled() ? fmt::format(" | loss scale {}", scale_text(scaler.scale())) : "";
        const std::string skipped =
            result.skipped_steps > 0 || scaler.enabled() ? fmt::format(" | skipped {}", result.skipped_steps) : "";
        const std::string comm =
            dp.ranks() > 1 ? fmt::format(", comm {:.1f} ms ({} ranks)", 1e3 * interval_comm / n, dp.ranks()) : "";
        console << fmt::format(
            "{}step {:>6}/{} | {} | lr {:.3e} | grad norm {}{}{} | data {:.1f} ms, compute {:.1f} ms{} | "
            "{:.1f} {}/s | {:.1f} GFLOP/s | {}\n",
            prefix, done, c.total_steps, recipe.loss_text(interval), lr, norm, scaling, skipped,
            1e3 * interval_data / n, 1e3 * interval_compute / n, comm, samples / elapsed, recipe.sample_unit(),
            recipe.flops_per_sample() * samples / dp.ranks() / interval_compute / 1e9, memory_text(memory_use()));
      }
      console.flush();
      interval_timer.reset();
      interval_data = interval_compute = interval_comm = 0;
      interval = IntervalLosses{};
      interval.parts.assign(names.size(), 0.0);
      interval_iterations = interval_skipped = interval_nan = 0;
    } else if (c.progress) {
      const double per_step = run_timer.seconds() / double(done - start_step);
      const int64_t left = last_step - done;
      const int width = 30;
      const int filled = int(double(width) * double(done) / double(std::max<int64_t>(1, last_step)));
      console << fmt::format("\r[{}{}] step {}/{} | {:.1f} s/step | ETA {}", std::string(size_t(filled), '#'),
                             std::string(size_t(width - filled), '.'), done, last_step, per_step,
                             duration_text(per_step * double(left)));
      console.flush();
      progress_shown = true;
    }

    // ---- evaluation, MLPerf blocks / epochs, checkpoints ----
    if (!epochs) {
      const bool eval_now = c.benchmark == 0 && (done % c.cadence.eval_interval == 0 || done == c.total_steps);
      if (eval_now) {
        const int64_t samples_seen = done * c.global_batch;
        if (mllog) log::log_bert_eval_start(*mllog, samples_seen);
        const double metric = evaluate(done, 0);
        if (mllog) {
          log::log_bert_eval_stop(*mllog, samples_seen, metric);
          track_stats(done);
          log::log_bert_block_stop(*mllog, block_first_samples);
        }
        block_open = false;
        if (reached(metric, done)) break;
      }
      if (done % c.cadence.save_interval == 0 || done == last_step) save_all(done);
    } else if (epoch_closes) {
      const int64_t epoch = done / steps_per_epoch;
      result.epochs = epoch;
      if (mllog) {
        track_stats(done);
        log::log_resnet_epoch_stop(*mllog, epoch);
      }
      const bool eval_now = c.benchmark == 0 && ((epoch - c.cadence.eval_start_epoch) % c.cadence.eval_every == 0 ||
                                                 epoch == total_epochs);
      if (eval_now) {
        const double metric = evaluate(done, epoch);
        if (mllog) log::log_resnet_eval(*mllog, epoch, metric);
        if (reached(metric, done)) break;
      }
      if (epoch % c.cadence.save_interval == 0 || done == last_step) save_all(done);
    } else if (done == last_step) {
      save_all(done);  // stopped inside an epoch (--exit-interval): a resumed run continues from here
    }
  }
  clear_progress();
  result.loss_scale = scaler.scale();
  if (profiling) console << ops::profile_report(profiled_seconds, profiled_steps);

  if (c.benchmark > 0 && !step_seconds.empty()) {
    console << estimated_training_time(step_seconds, c.total_steps);
    evaluate(result.steps, result.epochs);
  }
  if (!result.reached_target && c.benchmark == 0 && result.steps == c.total_steps && mllog)
    log::log_run_stop(*mllog, false);
  if (dp.ranks() > 1) console << dp.check_replicas(store) << "\n";
  if (state.groups && state.groups->tp->size() > 1) console << check_replicas(*state.groups->tp, store, true) << "\n";
  if (tensorboard) tensorboard->flush();
  console.flush();
  return result;
}

}  // namespace kiln::train
