// data/image/image_loader.h — multi-threaded decode + augment into float NHWC batches.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/data/image/image_dataset.h"
#include "kiln/data/image/transforms.h"

namespace kiln::data {

struct ImageBatch {
  int batch = 0, height = 0, width = 0;
  std::vector<float> images;    // (B, H, W, 3), mean-subtracted RGB
  std::vector<int32_t> labels;  // (B); -1 = padding row (image all zeros)
  int real = 0;                 // rows with label != -1
};

struct ImageLoaderOptions {
  int batch_size = 32;  // per rank
  bool train = true;    // train: shuffle, random-resized-crop, flip; eval: file order, centre crop
  int image_size = 224;
  int resize = 256;  // eval: the short side before the centre crop
  CropStyle crop_style = CropStyle::tinygrad;
  bool normalize_std = false;
  uint64_t seed = 42;
  int rank = 0, world_size = 1;
  int threads = 2;   // decode threads
  int prefetch = 2;  // batches decoded ahead of the consumer
  // Replace an unreadable image by the next readable one in stream order (and count it)
  // instead of throwing.
  bool skip_bad_images = false;
};

struct LoaderPosition {
  int64_t epoch = 0, batch = 0;
};

// An endless stream of batches, epoch after epoch. An epoch has ceil(N / (B * world_size))
// batches; global position g = batch * B * world_size + rank * B + row holds sample
// shuffle(g) (train) or g (eval), and rows with g >= N are padding. Every batch is a pure
// function of (seed, epoch, batch, rank): thread count and prefetch depth change nothing.
// The dataset must outlive the loader.
class ImageLoader {
 public:
  ImageLoader(const ImageFolderDataset& data, const ImageLoaderOptions& options);
  ~ImageLoader();
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Moves `batch`'s buffers into the loader and returns the next batch in it. Throws the
  // kiln::Error of an unreadable image (naming it) unless skip_bad_images.
  void next(ImageBatch& batch);
  // The batch next() returns next; seek() restarts there (for exact resume).
  LoaderPosition position() const;
  void seek(LoaderPosition position);
  // Unreadable images met in the batches returned so far (skip_bad_images).
  int64_t bad_images() const;

 private:
  struct Slot {
    ImageBatch batch;
    int64_t stream_index = -1;  // epoch * batches_per_epoch + batch
    int remaining = 0;          // rows not yet written
    int64_t bad = 0;
    int error_row = -1;
    std::exception_ptr error;
  };
  struct Worker;

  void work();
  // Writes one row of batch `stream_index`; returns the number of unreadable images skipped.
  int64_t fill_row(Worker& worker, int64_t stream_index, int row, float* image, int32_t* label);

  const ImageFolderDataset* data_;
  ImageLoaderOptions options_;
  Normalize normalize_;
  int64_t batches_per_epoch_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_, batch_ready_;
  std::vector<Slot> slots_;
  int64_t consumer_ = 0;   // stream index of the next batch to return
  int64_t next_task_ = 0;  // stream_index * batch_size + row
  int in_flight_ = 0;
  int64_t bad_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kiln::data
