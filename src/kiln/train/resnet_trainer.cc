#include "kiln/train/resnet_trainer.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <ostream>
#include <thread>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/core/philox.h"
#include "kiln/core/timer.h"
#include "kiln/data/image/image_dataset.h"
#include "kiln/data/image/image_loader.h"
#include "kiln/io/checkpoint.h"
#include "kiln/log/mllog_keys.h"
#include "kiln/log/resnet_mllog.h"
#include "kiln/log/submission.h"
#include "kiln/models/resnet.h"
#include "kiln/nn/cross_entropy.h"
#include "kiln/optim/lars.h"
#include "kiln/optim/lr_schedule.h"
#include "kiln/train/run_report.h"

namespace kiln::train {
namespace fs = std::filesystem;

namespace {

models::ResNetConfig model_config(const ResNetTrainConfig& c, int64_t classes) {
  models::ResNetConfig m = c.arch == "resnet18"   ? models::ResNetConfig::resnet18(classes)
                           : c.arch == "resnet34" ? models::ResNetConfig::resnet34(classes)
                           : c.arch == "resnet50" ? models::ResNetConfig::resnet50(classes)
                                                  : models::ResNetConfig::resnet101(classes);
  for (int64_t& w : m.widths) w = w * c.width / 64;
  m.stem_width = c.width;
  m.small_images = c.small_images;
  m.zero_init_residual = c.zero_init_residual;
  m.init = c.init == "mlperf" ? models::ResNetInit::mlperf : models::ResNetInit::torchvision;
  return m;
}

// Generated images for BENCHMARK runs: uniform noise in the normalised range, labels from Philox.
void fill_fake_images(data::ImageBatch& b, int batch, int size, int classes, uint64_t seed,
                      uint64_t step) {
  b.batch = batch;
  b.height = b.width = size;
  b.real = batch;
  b.images.resize(size_t(batch) * size * size * 3);
  b.labels.resize(size_t(batch));
  const RngStream rng{seed, rng_stream(RngPurpose::fake_data, 0, step)};
  for (size_t i = 0; i < b.images.size(); ++i) b.images[i] = 128.0f * rng.uniform(i) - 64.0f;
  for (int i = 0; i < batch; ++i) b.labels[size_t(i)] = int32_t(rng.below(b.images.size() + size_t(i), uint64_t(classes)));
}

}  // namespace

ResNetRunResult train_resnet(const ResNetTrainConfig& c,
                             const std::vector<std::pair<std::string, std::string>>& resolved,
                             std::ostream& console) {
  if (c.threads > 0) omp_set_num_threads(int(c.threads));
  ensure_writable_dir(c.output_dir);

  std::optional<data::ImageFolderDataset> train_set, val_set;
  int64_t classes = c.num_classes;
  if (!c.fake_data) {
    train_set = data::ImageFolderDataset::open(fs::path(c.data_dir) / "train");
    val_set = c.val_labels.empty()
                  ? data::ImageFolderDataset::open(fs::path(c.data_dir) / "val", &train_set->classes)
                  : data::ImageFolderDataset::open_flat(fs::path(c.data_dir) / "val", c.val_labels,
                                                        train_set->classes);
    const int64_t found = int64_t(train_set->classes.size());
    if (classes != 0 && classes != found)
      throw Error("config: model.num_classes is {} but {} has {} class folders", classes,
                  (fs::path(c.data_dir) / "train").string(), found);
    classes = found;
  }
  const int workers = c.workers > 0 ? int(c.workers) : int(std::max(1u, std::thread::hardware_concurrency()));
  auto loader_options = [&](bool train) {
    data::ImageLoaderOptions o;
    o.batch_size = int(train ? c.batch_size : c.eval_batch_size);
    o.train = train;
    o.image_size = int(c.image_size);
    o.resize = int(c.eval_resize);
    o.normalize_std = c.normalize_std;
    o.seed = uint64_t(c.seed);
    o.threads = workers;
    o.skip_bad_images = train && c.skip_bad_images;
    return o;
  };
  std::unique_ptr<data::ImageLoader> train_loader, val_loader;
  if (train_set) {
    train_loader = std::make_unique<data::ImageLoader>(*train_set, loader_options(true));
    val_loader = std::make_unique<data::ImageLoader>(*val_set, loader_options(false));
  }
  const int64_t steps_per_epoch =
      train_loader ? train_loader->batches_per_epoch() : std::max<int64_t>(1, 1281167 / c.batch_size);
  const int64_t total_steps = steps_per_epoch * c.epochs;
  const int64_t warmup_steps = int64_t(std::llround(c.warmup_epochs * double(steps_per_epoch)));

  ResNetRunResult result;
  result.log_file = fs::path(c.output_dir) / fmt::format("result_resnet_{}.log", c.seed);
  for (auto& [key, value] : resolved) console << fmt::format("HParam: \"{}\": {}\n", key, value);
  log::MlLogger mllog(result.log_file, false);
  log::ResNetRunInfo info;
  info.seed = c.seed;
  info.global_batch_size = c.batch_size;
  info.train_samples = train_set ? train_set->size() : 1281167;
  info.eval_samples = val_set ? val_set->size() : 50000;
  info.base_learning_rate = c.lr;
  info.end_learning_rate = c.end_lr;
  info.decay_steps = total_steps - warmup_steps + 1;
  info.warmup_epochs = c.warmup_epochs;
  info.momentum = c.momentum;
  info.weight_decay = c.weight_decay;
  info.submission.org = "kiln";
  info.submission.platform = c.submission_platform;
  log::log_resnet_init_start(mllog, info);

  ParamStore store;
  models::ResNet model(model_config(c, classes), store);
  model.init(uint64_t(c.seed));
  nn::NamedBuffers buffers = model.buffers();
  optim::Lars optimizer(store, optim::LarsConfig{float(c.momentum), float(c.weight_decay), 0.001f, 0.0f});
  const optim::PolyWarmupSchedule schedule(c.lr, warmup_steps, total_steps, 2.0, c.end_lr);
  std::vector<io::FlatState> opt_state;
  for (auto& s : optimizer.state()) opt_state.emplace_back(s.name, s.data);
  nn::SoftmaxCrossEntropy loss_fn(float(c.label_smoothing));

  int64_t start_step = 0;
  // As Megatron: a --load directory without a checkpoint means "start from scratch".
  std::optional<fs::path> latest;
  if (!c.load_dir.empty()) {
    latest = io::latest_checkpoint(c.load_dir);
    if (!latest)
      console << fmt::format("no checkpoint in {} (no latest_checkpointed_iteration.txt): starting from scratch\n",
                             c.load_dir);
  }
  if (latest) {
    const nlohmann::json meta = io::load_checkpoint(*latest, store, opt_state, buffers);
    start_step = meta.at("step").get<int64_t>();
    optimizer.set_steps_taken(meta.at("optimizer_steps").get<int64_t>());
    if (train_loader) train_loader->seek({start_step / steps_per_epoch, start_step % steps_per_epoch});
    console << fmt::format("resumed from {} at step {}\n", latest->string(), start_step);
  }
  std::optional<io::CheckpointManager> checkpoints;
  if (!c.save_dir.empty()) checkpoints.emplace(c.save_dir, c.keep_checkpoints);
  log::log_run_start(mllog);

  const int64_t size = c.image_size;
  const double flops_per_image = 3.0 * double(model.flops_per_image(size, size));
  console << fmt::format(
      "training {} ({} classes, {:.2f}M parameters) on {}x{} images: batch {}, {} steps per epoch, "
      "{} epochs, {} decode threads, from step {}\n",
      c.arch, classes, double(store.size()) / 1e6, size, size, c.batch_size, steps_per_epoch,
      c.epochs, workers, start_step);
  console.flush();

  data::ImageBatch batch;
  auto evaluate = [&]() {
    Timer timer;
    int64_t correct = 0, counted = 0;
    double loss = 0;
    const Step s{uint64_t(c.seed), 0, false};
    const int64_t batches = val_loader ? val_loader->batches_per_epoch() : std::min<int64_t>(c.benchmark, 10);
    if (val_loader) val_loader->seek({0, 0});
    for (int64_t i = 0; i < batches; ++i) {
      if (val_loader) val_loader->next(batch);
      else fill_fake_images(batch, int(c.eval_batch_size), int(size), int(classes), uint64_t(c.seed) + 1, uint64_t(i));
      const Tensor logits = model.forward(s, batch.images.data(), batch.batch, batch.height, batch.width);
      const nn::LossResult r = loss_fn.forward(logits, batch.labels.data());
      correct += r.correct;
      counted += int64_t(r.count);
      loss += r.loss * r.count;
    }
    const double top1 = counted ? double(correct) / double(counted) : 0;
    console << fmt::format("eval: top-1 {:.4f} ({} / {} images), loss {:.4f}, {:.1f} s\n", top1,
                           correct, counted, counted ? loss / double(counted) : 0, timer.seconds());
    console.flush();
    return top1;
  };
  auto save = [&](int64_t step) {
    nlohmann::json meta;
    meta["step"] = step;
    meta["optimizer_steps"] = optimizer.steps_taken();
    meta["seed"] = c.seed;
    meta["kiln_version"] = KILN_VERSION;
    for (auto& [key, value] : resolved) meta["config"][key] = value;
    mllog.start(log::key::kCheckpointStart, nullptr, {{"step_num", step}});
    result.checkpoint = checkpoints->save(step, store, opt_state, meta, buffers);
    mllog.end(log::key::kCheckpointStop, nullptr, {{"step_num", step}});
    console << fmt::format("saved checkpoint {}\n", result.checkpoint.string());
  };

  int64_t last_step = c.benchmark > 0 ? std::min(total_steps, start_step + c.benchmark) : total_steps;
  if (c.exit_interval > 0) last_step = std::min(last_step, c.exit_interval);
  std::vector<double> step_seconds;
  Timer interval_timer;
  double interval_data = 0, interval_compute = 0;
  int64_t interval_steps = 0, interval_correct = 0, interval_count = 0;
  int64_t step = start_step;
  while (step < last_step) {
    const int64_t epoch = step / steps_per_epoch;  // 0-based
    if (step % steps_per_epoch == 0 || step == start_step) log::log_resnet_epoch_start(mllog, epoch + 1);
    const int64_t epoch_end = std::min(last_step, (epoch + 1) * steps_per_epoch);
    for (; step < epoch_end; ++step) {
      Timer step_timer;
      Timer data_timer;
      if (train_loader) train_loader->next(batch);
      else fill_fake_images(batch, int(c.batch_size), int(size), int(classes), uint64_t(c.seed), uint64_t(step));
      const double data_seconds = data_timer.seconds();
      const Step s{uint64_t(c.seed), uint64_t(step), true};
      store.zero_grad();
      const Tensor logits = model.forward(s, batch.images.data(), batch.batch, batch.height, batch.width);
      const nn::LossResult r = loss_fn.forward(logits, batch.labels.data());
      if (!std::isfinite(r.loss))
        throw Error("step {}: loss is {} (diverged); lower optim.lr", step + 1, r.loss);
      model.backward(s, loss_fn.backward(1.0f));
      const double lr = schedule.lr(step);
      optimizer.step(float(lr));
      const double seconds = step_timer.seconds();
      step_seconds.push_back(seconds);
      result.losses.push_back(r.loss);
      result.steps = step + 1;
      interval_data += data_seconds;
      interval_compute += seconds - data_seconds;
      interval_correct += r.correct;
      interval_count += int64_t(r.count);
      ++interval_steps;
      if ((step + 1) % c.log_interval == 0 || step + 1 == epoch_end) {
        const double images = double(interval_steps * c.batch_size);
        console << fmt::format(
            "epoch {:>3} step {:>6}/{} | loss {:.4f} | acc {:.3f} | lr {:.4e} | data {:.1f} ms, "
            "compute {:.1f} ms | {:.1f} images/s | {:.1f} GFLOP/s | {:.2f} GiB\n",
            epoch + 1, step + 1, total_steps, r.loss,
            interval_count ? double(interval_correct) / double(interval_count) : 0.0, lr,
            1e3 * interval_data / double(interval_steps), 1e3 * interval_compute / double(interval_steps),
            images / interval_timer.seconds(), flops_per_image * images / interval_compute / 1e9,
            resident_gib());
        console.flush();
        interval_timer.reset();
        interval_data = interval_compute = 0;
        interval_steps = interval_correct = interval_count = 0;
      }
    }
    if (step % steps_per_epoch != 0) break;  // stopped mid-epoch (benchmark, exit interval)
    const int64_t done = step / steps_per_epoch;  // epochs completed, 1-based number of this one
    result.epochs = done;
    log::log_resnet_epoch_stop(mllog, done);
    const bool eval_now = c.benchmark == 0 && ((done - c.eval_start_epoch) % c.eval_freq == 0 ||
                                               done == c.epochs);
    if (eval_now) {
      const double top1 = evaluate();
      result.eval_top1.push_back(top1);
      log::log_resnet_eval(mllog, done, top1);
      if (top1 >= c.target) {
        result.reached_target = true;
        console << fmt::format("target top-1 {} reached after epoch {}\n", c.target, done);
        log::log_run_stop(mllog, true);
        if (checkpoints) save(step);
        break;
      }
    }
    if (checkpoints && (done % c.save_interval == 0 || step == last_step)) save(step);
  }
  if (train_loader) result.bad_images = train_loader->bad_images();
  if (result.bad_images > 0)
    console << fmt::format("skipped {} unreadable training images\n", result.bad_images);

  if (c.benchmark > 0 && !step_seconds.empty()) {
    console << estimated_training_time(step_seconds, total_steps);
    result.eval_top1.push_back(evaluate());
  }
  if (!result.reached_target && c.benchmark == 0 && result.steps == total_steps)
    log::log_run_stop(mllog, false);
  return result;
}

}  // namespace kiln::train
