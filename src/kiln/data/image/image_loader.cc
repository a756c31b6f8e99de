// data/image/image_loader.cc — worker threads claim (batch, row) tasks in stream order and
// write straight into a ring of `prefetch` batch slots; the consumer swaps a finished slot out.
#include "kiln/data/image/image_loader.h"

#include <algorithm>
#include <cstring>

#include "kiln/core/error.h"
#include "kiln/data/image/decode.h"
#include "kiln/data/image/shuffle.h"

namespace kiln::data {

struct ImageLoader::Worker {
  std::vector<uint8_t> file;
  Image image;
  ResampleScratch scratch;
};

ImageLoader::ImageLoader(const ImageFolderDataset& data, const ImageLoaderOptions& options)
    : data_(&data), options_(options), normalize_(Normalize::mlperf(options.normalize_std)) {
  KILN_CHECK(data.size() > 0, "image loader: dataset {} is empty", data.root.string());
  KILN_CHECK(options.batch_size >= 1, "image loader: batch size {} must be at least 1", options.batch_size);
  KILN_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size,
             "image loader: rank {} outside world size {}", options.rank, options.world_size);
  KILN_CHECK(options.threads >= 1 && options.prefetch >= 1, "image loader: threads {} and prefetch {} must be at least 1",
             options.threads, options.prefetch);
  KILN_CHECK(data.labels.size() == data.files.size(), "image loader: dataset {} has {} labels for {} files",
             data.root.string(), data.labels.size(), data.files.size());
  // The loss assumes valid labels: catch a bad one here, naming its file.
  for (size_t i = 0; i < data.files.size(); ++i)
    KILN_CHECK(data.labels[i] >= 0 && size_t(data.labels[i]) < data.classes.size(),
               "image loader: {}: label {} outside the {} classes of {}", data.files[i].string(),
               data.labels[i], data.classes.size(), data.root.string());
  const int64_t global = int64_t(options.batch_size) * options.world_size;
  batches_per_epoch_ = (data.size() + global - 1) / global;
  slots_.resize(size_t(options.prefetch));
  for (int t = 0; t < options.threads; ++t) threads_.emplace_back([this] { work(); });
}

ImageLoader::~ImageLoader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

LoaderPosition ImageLoader::position() const {
  std::lock_guard lock(mutex_);
  return {consumer_ / batches_per_epoch_, consumer_ % batches_per_epoch_};
}

int64_t ImageLoader::bad_images() const {
  std::lock_guard lock(mutex_);
  return bad_;
}

void ImageLoader::seek(LoaderPosition position) {
  KILN_CHECK(position.epoch >= 0 && position.batch >= 0 && position.batch <= batches_per_epoch_,
             "image loader: cannot seek to epoch {} batch {} ({} batches per epoch)", position.epoch,
             position.batch, batches_per_epoch_);
  std::unique_lock lock(mutex_);
  batch_ready_.wait(lock, [&] { return in_flight_ == 0; });
  consumer_ = position.epoch * batches_per_epoch_ + position.batch;
  next_task_ = consumer_ * options_.batch_size;
  for (Slot& slot : slots_) slot.stream_index = -1;
  lock.unlock();
  work_ready_.notify_all();
}

void ImageLoader::next(ImageBatch& batch) {
  std::unique_lock lock(mutex_);
  Slot& slot = slots_[size_t(consumer_ % options_.prefetch)];
  batch_ready_.wait(lock, [&] { return slot.stream_index == consumer_ && slot.remaining == 0; });
  if (slot.error) std::rethrow_exception(slot.error);
  std::swap(batch, slot.batch);
  batch.real = int(std::count_if(batch.labels.begin(), batch.labels.end(), [](int32_t l) { return l >= 0; }));
  bad_ += slot.bad;
  ++consumer_;
  lock.unlock();
  work_ready_.notify_all();
}

void ImageLoader::work() {
  Worker worker;
  const int b = options_.batch_size, size = options_.image_size;
  std::unique_lock lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [&] { return stop_ || next_task_ / b < consumer_ + options_.prefetch; });
    if (stop_) return;
    const int64_t stream_index = next_task_ / b;
    const int row = int(next_task_ % b);
    ++next_task_;
    Slot& slot = slots_[size_t(stream_index % options_.prefetch)];
    if (row == 0) {  // rows are claimed in order, so row 0 prepares the slot
      slot.stream_index = stream_index;
      slot.remaining = b;
      slot.bad = 0;
      slot.error_row = -1;
      slot.error = nullptr;
      slot.batch.batch = b;
      slot.batch.height = slot.batch.width = size;
      slot.batch.images.resize(size_t(b) * size * size * 3);
      slot.batch.labels.resize(size_t(b));
    }
    ++in_flight_;
    float* image = slot.batch.images.data() + size_t(row) * size * size * 3;
    int32_t* label = slot.batch.labels.data() + row;
    lock.unlock();
    int64_t bad = 0;
    std::exception_ptr error;
    try {
      bad = fill_row(worker, stream_index, row, image, label);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    slot.bad += bad;
    if (error && (slot.error_row < 0 || row < slot.error_row)) {  // report the first bad row
      slot.error = error;
      slot.error_row = row;
    }
    --in_flight_;
    if (--slot.remaining == 0 || in_flight_ == 0) batch_ready_.notify_all();
  }
}

int64_t ImageLoader::fill_row(Worker& worker, int64_t stream_index, int row, float* image, int32_t* label) {
  const int64_t n = data_->size(), epoch = stream_index / batches_per_epoch_;
  const int64_t g = (stream_index % batches_per_epoch_) * options_.batch_size * options_.world_size +
                    int64_t(options_.rank) * options_.batch_size + row;
  const int size = options_.image_size;
  if (g >= n) {
    std::memset(image, 0, sizeof(float) * size * size * 3);
    *label = -1;
    return 0;
  }
  const SampleRng rng = SampleRng::make(options_.seed, epoch, g);
  const auto file_at = [&](int64_t p) {
    return options_.train ? int64_t(shuffled_index(uint64_t(p % n), uint64_t(n), options_.seed, uint64_t(epoch)))
                          : p % n;
  };
  for (int64_t skipped = 0;; ++skipped) {
    const int64_t file = file_at(g + skipped);
    try {
      ImageSize stored;
      CropBox box;
      decode_image_file(data_->files[size_t(file)], worker.file, worker.image, [&](ImageSize s) {
        stored = s;
        box = options_.train ? random_resized_crop_box(s, options_.crop_style, rng)
                             : center_crop_box(s, options_.resize, size);
        return min_decode_size(s, box, size, size);
      });
      box = scale_box(box, stored, {worker.image.height, worker.image.width});
      resample_box(worker.image, box, size, size, options_.train && random_flip(rng), normalize_, image,
                   worker.scratch);
      *label = data_->labels[size_t(file)];
      return skipped;
    } catch (const Error&) {
      if (!options_.skip_bad_images || skipped + 1 >= n) throw;
    }
  }
}

}  // namespace kiln::data
