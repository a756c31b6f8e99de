#include "kiln/train/config/resnet_config.h"

#include <cmath>
#include <filesystem>

#include "kiln/core/error.h"
#include "kiln/train/config/devices_config.h"
#include "kiln/train/config/shared_flags.h"
#include "kiln/train/dry_run/device_model.h"

namespace kiln::train {
namespace {

// The class folders of DIR/train (a dry run's class count, without listing the images).
int64_t class_folders(const std::string& data_dir) {
  const std::filesystem::path train = std::filesystem::path(data_dir) / "train";
  std::error_code error;
  int64_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(train, error)) n += entry.is_directory() ? 1 : 0;
  if (error) throw Error("config: cannot list {}: {}", train.string(), error.message());
  return n;
}

}  // namespace

void register_resnet_config(ConfigRegistry& r, ResNetTrainConfig& c) {
  r.add_string("model.arch", &c.arch, "", {"--arch"}, "resnet18, resnet34, resnet50 or resnet101");
  r.add_int("model.num_classes", &c.num_classes, "", {"--num-classes"},
            "classes (0: the class folders found)");
  r.add_int("model.width", &c.width, "", {"--width"}, "channels of the first stage");
  r.add_bool("model.small_images", &c.small_images, "", {"--small-images"},
             "3x3 stem without max-pool, for 28x28 / 32x32 images");
  r.add_bool("model.zero_init_residual", &c.zero_init_residual, "", {"--zero-init-residual"},
             "zero-init each block's last BN gamma");
  r.add_string("model.init", &c.init, "", {"--init"},
               "torchvision (He fan-out) or mlperf (truncated He fan-in, fc N(0, 0.01))");

  r.add_string("data.dir", &c.data_dir, "BASEDIR", {"--data"}, "image folder (train/, val/)");
  r.add_string("data.val_labels", &c.val_labels, "", {"--val-labels"},
               "labels file for a flat val/ folder");
  r.add_int("data.image_size", &c.image_size, "", {"--image-size"}, "training/eval crop size");
  r.add_int("data.eval_resize", &c.eval_resize, "", {"--eval-resize"},
            "eval: short side resized to this before the centre crop");
  r.add_bool("data.normalize_std", &c.normalize_std, "", {"--normalize-std"},
             "also divide by the ImageNet std (the reference does not)");
  r.add_bool("data.skip_bad_images", &c.skip_bad_images, "", {"--skip-bad-images"},
             "skip unreadable training images (counted) instead of stopping");
  r.add_int("data.workers", &c.workers, "NUM_CPU_THREADS", {"--workers"}, "decode threads (0: cores)");
  r.add_bool("data.fake", &c.fake_data, "", {"--fake-data"}, "generated images");

  r.add_int("train.batch_size", &c.batch_size, "BS", {"--batch-size", "--global-batch-size"},
            "images per step");
  r.add_int("train.epochs", &c.epochs, "EPOCHS", {"--epochs"}, "epochs (schedule length)");
  register_run_length_flags(r, c, "seed for init, augmentation and order", "compute threads (0: all cores)");
  register_precision_config(r, c.precision);

  register_devices_config(r, c.devices);
  r.add_bool("parallel.sync_bn", &c.sync_bn, "SYNCBN", {"--sync-bn"},
             "BatchNorm statistics over the images of every rank (default: per rank)");
  register_data_parallel_flags(r, c);
  r.add_float("optim.lr", &c.lr, "LR", {"--lr"}, "peak learning rate (0: 7.2 * BS / 1536)");
  r.add_float("optim.end_lr", &c.end_lr, "", {"--end-lr"}, "learning rate at the end (MLPerf: 1e-4)");
  r.add_float("optim.warmup_epochs", &c.warmup_epochs, "WARMUP_EPOCHS", {"--warmup-epochs"},
              "linear warmup epochs");
  r.add_float("optim.momentum", &c.momentum, "", {"--momentum"}, "LARS / SGD momentum");
  r.add_float("optim.weight_decay", &c.weight_decay, "DECAY", {"--weight-decay"},
              "weight decay on conv and fc weights");
  r.add_float("optim.label_smoothing", &c.label_smoothing, "", {"--label-smoothing"},
              "label smoothing (MLPerf: 0 or 0.1)");

  r.add_int("eval.batch_size", &c.eval_batch_size, "EVAL_BS", {"--eval-batch-size"}, "eval batch");
  r.add_int("eval.start_epoch", &c.eval_start_epoch, "EVAL_START_EPOCH", {"--eval-start-epoch"},
            "first epoch offset of the eval schedule");
  r.add_int("eval.freq", &c.eval_freq, "EVAL_FREQ", {"--eval-freq"}, "epochs between evals");
  r.add_int("eval.every_epoch_from", &c.eval_every_epoch_from, "", {"--eval-every-epoch-from"},
            "evaluate after every epoch from this one on (0: never)");
  r.add_float("eval.target", &c.target, "TARGET", {"--target"}, "top-1 accuracy that ends the run");

  register_output_flags(r, c, "directory for result_resnet_<seed>.log", "", "epochs between checkpoints");
  register_dry_run_flags(r, c);
  register_submission_flags(r, c);
}

void finalize_resnet_config(ResNetTrainConfig& c, const ConfigRegistry& r) {
  auto positive = [](int64_t v, const char* key) {
    if (v <= 0) throw Error("config: {} must be positive, got {}", key, v);
  };
  if (c.arch != "resnet18" && c.arch != "resnet34" && c.arch != "resnet50" && c.arch != "resnet101")
    throw Error("config: model.arch must be resnet18, resnet34, resnet50 or resnet101, got '{}'", c.arch);
  positive(c.width, "model.width");
  if (c.init != "torchvision" && c.init != "mlperf")
    throw Error("config: model.init must be torchvision or mlperf, got '{}'", c.init);
  finalize_mlperf_phase(c.mlperf);
  check_ddp_config(c.ddp);
  if (c.mlperf.phase == MlperfPhase::init && c.benchmark == 0) c.benchmark = 10;
  if (c.dry_run && c.num_classes == 0 && !c.data_dir.empty()) c.num_classes = class_folders(c.data_dir);
  check_device_model_setting(c.device_model, c.dry_run, c.dry_run_json);
  if (c.benchmark > 0 || c.dry_run) c.fake_data = true;
  if (!c.fake_data && c.data_dir.empty())
    throw Error("config: data.dir is not set (use --data DIR, or --fake-data / BENCHMARK=N)");
  if (c.fake_data && c.num_classes == 0) c.num_classes = 1000;
  c.devices = resolve_devices(c.devices, c.dry_run);
  if (c.batch_size == 0) c.batch_size = 104 * c.devices;  // tinygrad: BS = 104 x GPUS
  positive(c.batch_size, "train.batch_size");
  positive(c.epochs, "train.epochs");
  if (!(c.dist_timeout >= 0)) throw Error("config: parallel.dist_timeout must be >= 0, got {}", c.dist_timeout);
  if (!(c.save_timeout >= 0)) throw Error("config: parallel.save_timeout must be >= 0, got {}", c.save_timeout);
  positive(c.image_size, "data.image_size");
  if (c.eval_resize < c.image_size)
    throw Error("config: data.eval_resize ({}) is smaller than data.image_size ({})", c.eval_resize,
                c.image_size);
  if (c.lr == 0 && !r.was_set("optim.lr")) c.lr = 7.2 * double(c.batch_size) / 1536.0;
  if (c.lr <= 0) throw Error("config: optim.lr must be positive, got {}", c.lr);
  if (c.warmup_epochs < 0 || c.warmup_epochs > double(c.epochs))
    throw Error("config: optim.warmup_epochs must be in [0, train.epochs], got {}", c.warmup_epochs);
  if (c.label_smoothing < 0 || c.label_smoothing >= 1)
    throw Error("config: optim.label_smoothing must be in [0, 1), got {}", c.label_smoothing);
  finalize_precision_config(c.precision, r, 256.0);  // tinygrad ResNet: LOSS_SCALER 256 with HALF
  if (c.eval_batch_size == 0) c.eval_batch_size = c.batch_size;
  positive(c.eval_batch_size, "eval.batch_size");
  positive(c.eval_freq, "eval.freq");
  if (c.eval_every_epoch_from < 0)
    throw Error("config: eval.every_epoch_from must be >= 0, got {}", c.eval_every_epoch_from);
  positive(c.log_interval, "run.log_interval");
  positive(c.save_interval, "run.save_interval");
  positive(c.keep_checkpoints, "run.keep_checkpoints");
}

}  // namespace kiln::train
