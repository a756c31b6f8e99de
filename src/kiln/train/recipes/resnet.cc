// train/recipes/resnet.cc — what is specific to ResNet: the image folders (or generated images
// for BENCHMARK runs), the model, LARS and its schedule, the MLPerf ResNet run info, top-1
// evaluation, the console's loss and accuracy fields. The loop does the rest.
#include "kiln/train/recipes/resnet.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <ostream>

#include "kiln/core/cpu_features.h"
#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/core/philox.h"
#include "kiln/core/philox_batch.h"
#include "kiln/core/timer.h"
#include "kiln/data/image/image_dataset.h"
#include "kiln/data/image/image_loader.h"
#include "kiln/dist/world.h"
#include "kiln/log/resnet_mllog.h"
#include "kiln/models/resnet.h"
#include "kiln/models/resnet_footprint.h"
#include "kiln/nn/cross_entropy.h"
#include "kiln/optim/lars.h"
#include "kiln/optim/loss_scaler.h"
#include "kiln/optim/lr_schedule.h"
#include "kiln/train/data_parallel.h"
#include "kiln/train/dry_run/perf_model.h"
#include "kiln/train/dry_run/resnet_dry_run.h"
#include "kiln/train/loop.h"
#include "kiln/train/phase_log.h"
#include "kiln/train/resume.h"
#include "kiln/train/run_setup.h"

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

// What a resumed run must share with its checkpoint (train/resume.h).
RunSettings run_settings(const ResNetTrainConfig& c, int64_t classes) {
  using Waiver = RunSetting::Waiver;
  return {{"recipe", "resnet"},
          {"model.arch", c.arch},
          {"model.width", c.width},
          {"model.num_classes", classes},
          {"model.small_images", c.small_images},
          {"data.image_size", c.image_size, Waiver::finetune},
          {"train.batch_size", c.batch_size, Waiver::finetune},
          {"train.seed", c.seed, Waiver::no_load_rng}};
}

// Generated images for BENCHMARK runs: uniform noise in the normalised range, labels from Philox.
// Rows `first_row`.. of generated batch `index`: a rank's share of a global batch holds the same
// rows a single process generates for it.
void fill_fake_images(data::ImageBatch& b, int batch, int first_row, int size, int classes, uint64_t seed,
                      uint64_t index) {
  b.batch = batch;
  b.height = b.width = size;
  b.real = batch;
  const size_t pixels = size_t(size) * size * 3;
  b.images.resize(size_t(batch) * pixels);
  b.labels.resize(size_t(batch));
  const RngStream rng{seed, rng_stream(RngPurpose::fake_data, 0, index)};
  float* const images = b.images.data();
  int32_t* const labels = b.labels.data();
#pragma omp parallel for schedule(static)
  for (int r = 0; r < batch; ++r) {
    const size_t key = size_t(first_row + r) * (pixels + 1);  // the row's pixels, then its label
    float* image = images + size_t(r) * pixels;
    uniforms(rng, key, pixels, image);
#pragma omp simd
    for (size_t i = 0; i < pixels; ++i) image[i] = 128.0f * image[i] - 64.0f;
    labels[r] = int32_t(rng.below(key + pixels, uint64_t(classes)));
  }
}

// Each rank evaluates its share of every eval batch (the loader pads the last one).
// Beyond the convolutions' scratch: what other ops keep in the arena meanwhile (a loss's few bytes).
constexpr size_t kScratchSlack = size_t(64) << 10;

void check_batch_splits(const ResNetTrainConfig& c, int ranks) {
  if (c.batch_size % ranks != 0)
    throw Error("config: train.batch_size {} does not split over {} ranks: use a multiple of {}", c.batch_size, ranks,
                ranks);
}

int eval_batch_per_rank(const ResNetTrainConfig& c, int ranks) {
  return int(std::max<int64_t>(1, (c.eval_batch_size + ranks - 1) / ranks));
}

class ResNetRecipe : public Recipe {
 public:
  ResNetRecipe(const ResNetTrainConfig& c, models::ResNet& model, data::ImageLoader* train_loader,
               data::ImageLoader* val_loader, int64_t classes, int64_t steps_per_epoch, int64_t parameters,
               int workers, dist::Communicator& comm, Context& ctx)
      : c_(c), ctx_(ctx), model_(model), train_loader_(train_loader), val_loader_(val_loader), classes_(classes),
        steps_per_epoch_(steps_per_epoch), parameters_(parameters), workers_(workers), comm_(comm),
        loss_fn_(float(c.label_smoothing)) {}

  std::vector<std::string> loss_names() const override { return {"loss"}; }

  void load(const Step& step) override {
    if (train_loader_) {
      train_loader_->next(batch_);
      return;
    }
    const int per_rank = int(c_.batch_size) / comm_.size();
    fill_fake_images(batch_, per_rank, int(step.sample_offset % uint64_t(c_.batch_size)), int(c_.image_size),
                     int(classes_), uint64_t(c_.seed), step.sample_offset / uint64_t(c_.batch_size));
  }

  void forward_backward(const Step& step, int64_t micro, float grad_scale) override {
    model_.forward_backward(step, batch_.images.data(), batch_.batch, batch_.height, batch_.width,
                            batch_.labels.data(), loss_fn_, grad_scale);
    Tensor& slot = micro_batch_slot(loss_slots_, micro, ctx_, 3);
    ops::copy(ctx_, loss_fn_.totals(), slot);
  }

  MicroBatchLosses read_losses(int64_t micro) override {
    const nn::LossResult r = loss_fn_.read(loss_slots_.at(size_t(micro)));
    return {r.loss, {r.loss}, r.correct, int64_t(r.count)};
  }

  double evaluate(int64_t, int64_t, Sinks& sinks) override {
    Timer timer;
    int64_t correct = 0, counted = 0;
    double loss = 0;
    Step s;
    s.ctx = &ctx_;
    s.seed = uint64_t(c_.seed);
    s.training = false;
    s.compute_dtype = c_.precision.dtype;
    const int64_t size = c_.image_size;
    const int64_t batches = val_loader_ ? val_loader_->batches_per_epoch() : std::min<int64_t>(c_.benchmark, 10);
    const int per_rank = eval_batch_per_rank(c_, comm_.size());
    if (val_loader_) val_loader_->seek({0, 0});
    for (int64_t i = 0; i < batches; ++i) {
      if (val_loader_) val_loader_->next(batch_);
      else fill_fake_images(batch_, per_rank, per_rank * comm_.rank(), int(size), int(classes_), uint64_t(c_.seed) + 1,
                            uint64_t(i));
      const Tensor logits = model_.forward(s, batch_.images.data(), batch_.batch, batch_.height, batch_.width);
      const nn::LossResult r = loss_fn_.forward(logits, batch_.labels.data(), ctx_);
      correct += r.correct;
      counted += int64_t(r.count);
      loss += r.loss * r.count;
    }
    std::vector<double> sums = {double(correct), double(counted), loss};  // every rank's share of the images
    dist::all_reduce_sum(comm_, sums);
    correct = int64_t(sums[0]);
    counted = int64_t(sums[1]);
    loss = sums[2];
    const double top1 = counted ? double(correct) / double(counted) : 0;
    sinks.console() << fmt::format("eval: top-1 {:.4f} ({} / {} images), loss {:.4f}, {:.1f} s\n", top1,
                                   correct, counted, counted ? loss / double(counted) : 0, timer.seconds());
    sinks.console().flush();
    return top1;
  }

  std::string loss_text(const IntervalLosses& i) const override {
    if (i.steps == 0) return "loss - | acc -";
    return fmt::format("loss {:.4f} | acc {:.3f}", i.last_loss,
                       i.count ? double(i.correct) / double(i.count) : 0.0);
  }
  const char* sample_unit() const override { return "images"; }
  std::string metric_name() const override { return "top-1"; }
  double flops_per_sample() const override {
    return 3.0 * double(model_.flops_per_image(c_.image_size, c_.image_size));
  }

  void resume(const io::CheckpointMeta& meta, int64_t step, Sinks& sinks) override {
    if (train_loader_) train_loader_->seek({step / steps_per_epoch_, step % steps_per_epoch_});
    sinks.console() << fmt::format("resumed from {} at step {}\n", meta.dir().string(), step);
  }

  std::string start_line(int64_t start_step) const override {
    return fmt::format(
        "training {} ({} classes, {:.2f}M parameters) on {}x{} images: batch {}, {} steps per epoch, "
        "{} epochs, {} decode threads, from step {}\n",
        c_.arch, classes_, double(parameters_) / 1e6, c_.image_size, c_.image_size, c_.batch_size,
        steps_per_epoch_, c_.epochs, workers_, start_step) +
           fmt::format("  data {}; LARS lr {}, {} warmup epochs; logs in {}, checkpoints {}\n",
                       c_.fake_data ? std::string("generated (fake)") : c_.data_dir, c_.lr, c_.warmup_epochs,
                       c_.output_dir, c_.save_dir.empty() ? std::string("not saved") : c_.save_dir);
  }

 private:
  const ResNetTrainConfig& c_;
  Context& ctx_;
  models::ResNet& model_;
  data::ImageLoader* train_loader_;
  data::ImageLoader* val_loader_;
  int64_t classes_, steps_per_epoch_, parameters_;
  int workers_;
  dist::Communicator& comm_;
  nn::SoftmaxCrossEntropy loss_fn_;
  std::vector<Tensor> loss_slots_;  // per micro-batch of a step: the loss's totals
  data::ImageBatch batch_;
};

// The performance model's run: one micro-batch of batch_size / devices per rank.
ResNetPerfRun resnet_perf_run(const ResNetTrainConfig& c, int devices) {
  return {.model = model_config(c, c.num_classes), .image = c.image_size, .batch = c.batch_size / devices,
          .dp = devices, .compute = c.precision.dtype,
          .loss_scaling = optim::LossScaler(c.precision.scaler).enabled(),
          .distributed_optimizer = c.distributed_optimizer};
}

}  // namespace

ResNetRunResult train_resnet(const ResNetTrainConfig& c, const ResolvedConfig& resolved, std::ostream& console) {
  if (c.dry_run) {
    const int devices = int(c.devices);
    check_batch_splits(c, devices);
    if (dist::world().rank() == 0 && c.dry_run_json) {
      const DeviceModel& device = device_model(c.device_model);
      console << format_step_json(resnet_step_model(resnet_perf_run(c, devices), device), device);
      return {};
    }
    if (dist::world().rank() == 0)
      console << resnet_dry_run(model_config(c, c.num_classes), c.arch, c.image_size, c.batch_size / devices,
                                eval_batch_per_rank(c, devices), devices, c.distributed_optimizer,
                                c.precision.dtype, c.precision.splits_master()).text
              << "  " << precision_note(c.precision.dtype, cpu_features()) << "\n";
    if (dist::world().rank() == 0 && !c.device_model.empty()) {
      const DeviceModel& device = device_model(c.device_model);
      console << format_step_table(resnet_step_model(resnet_perf_run(c, devices), device), device);
    }
    return {};
  }
  check_batch_splits(c, dist::world().size());
  RunSpec spec = run_spec(c);
  spec.global_batch = c.batch_size;  // one micro-batch per rank
  RunSetup setup(spec, console);
  dist::Communicator& world = setup.world();
  DataParallel& data_parallel = setup.data_parallel();
  const int64_t micro_batch = data_parallel.micro_batch();  // this rank's share of the batch

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
  // Decode threads: this rank's cores (dist/placement.h), so N ranks on one machine do not oversubscribe it.
  const int workers = c.workers > 0 ? int(c.workers) : int(setup.placement().cores.size());
  auto loader_options = [&](bool train) {
    data::ImageLoaderOptions o;
    o.batch_size = train ? int(micro_batch) : eval_batch_per_rank(c, world.size());
    o.rank = world.rank();
    o.world_size = world.size();
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
  setup.open(run_settings(c, classes), resolved);
  PhaseLog& mllog = setup.open_mllog(fmt::format("result_resnet_{}.log", c.seed));
  result.log_file = mllog.path();
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
  info.submission.org = c.submission_org;
  info.submission.platform = c.submission_platform;
  mllog.log_preamble([&](log::MlLogger& ml) { log::log_resnet_submission(ml, info); },
                     [&](log::MlLogger& ml) { log::log_resnet_hyperparameters(ml, info); });

  ParamStore& store = setup.make_store();
  RunContext& run = setup.run();
  // The CPU backend's convolutions say what scratch they take: one block for it from the start.
  if (run.ctx.device.is_cpu())
    run.scratch.reserve(size_t(models::resnet_footprint(model_config(c, classes), micro_batch,
                                                        eval_batch_per_rank(c, world.size()), c.image_size,
                                                        c.precision.dtype).scratch) + kScratchSlack);
  models::ResNet model(model_config(c, classes), store);  // on the host, then moved to the run's device
  model.init(uint64_t(c.seed));
  model.set_sync_bn(c.sync_bn ? &world : nullptr);
  setup.zero_init_phase_weights();
  setup.to_device([&](Context& ctx) { model.to_device(ctx); });
  optim::Lars optimizer(store, optim::LarsConfig{float(c.momentum), float(c.weight_decay), 0.001f, 0.0f},
                        run.ctx, setup.optimizer_shard());
  // LARS's trust ratios from whole-parameter norms: the shards' partial sums added.
  if (data_parallel.sharded())
    optimizer.set_norm_reduction([&data_parallel](Tensor& norms) { data_parallel.sum_norms(norms); });
  const optim::PolyWarmupSchedule schedule(c.lr, warmup_steps, total_steps, 2.0, c.end_lr);
  std::vector<io::FlatState> buffers;
  for (auto& b : model.buffers()) buffers.emplace_back(b.first, b.second);

  LoopConfig loop = shared_loop_config(c);
  loop.total_steps = total_steps;
  loop.cadence.kind = Cadence::Kind::epochs;
  loop.cadence.steps_per_epoch = steps_per_epoch;
  loop.cadence.eval_start_epoch = c.eval_start_epoch;
  loop.cadence.eval_every = c.eval_freq;
  loop.cadence.eval_every_epoch_from = c.eval_every_epoch_from;
  loop.cadence.save_interval = c.save_interval;

  ResNetRecipe recipe(c, model, train_loader.get(), val_loader.get(), classes, steps_per_epoch, store.size(),
                      workers, world, run.ctx);
  const LoopResult r = setup.train(loop, recipe, optimizer, schedule, buffers);
  result.steps = r.steps;
  result.epochs = r.epochs;
  result.losses = r.losses;
  result.eval_top1 = r.evals;
  result.reached_target = r.reached_target;
  result.checkpoint = r.checkpoint;
  result.skipped_steps = r.skipped_steps;
  result.loss_scale = r.loss_scale;
  if (train_loader) result.bad_images = train_loader->bad_images();
  if (result.bad_images > 0)
    setup.console() << fmt::format("skipped {} unreadable training images\n", result.bad_images);
  return result;
}

}  // namespace kiln::train
