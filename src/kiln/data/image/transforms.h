// data/image/transforms.h — random-resized-crop, flip, antialiased bilinear resize, normalize.
// Crops are boxes in source pixel coordinates; one resample maps a box straight to the output,
// so crop + resize (and the eval "resize 256, centre-crop 224") never materialise an image.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/core/philox.h"
#include "kiln/data/image/image.h"

namespace kiln::data {

// PIL's box convention: the output spans [x0, x1) x [y0, y1) of the source pixel grid.
struct CropBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  double width() const { return x1 - x0; }
  double height() const { return y1 - y0; }
};

enum class CropStyle {
  // tinygrad / TF sample_distorted_bounding_box: ratio a ~ U(3/4, 4/3) (linear);
  // area = w*h*U(0.10, min(w*a/h, h/(a*w), 1)); up to 100 attempts, then the eval centre crop.
  tinygrad,
  // torchvision RandomResizedCrop defaults: area = w*h*U(0.08, 1); log a ~ U(log 3/4, log 4/3);
  // 10 attempts, then a centre crop of the whole image with its ratio clamped to [3/4, 4/3].
  torchvision,
};

// The random numbers of one sample: a pure function of (seed, epoch, sample position), so
// augmentation does not depend on thread count or on which worker decodes the sample.
struct SampleRng {
  RngStream stream;
  uint64_t base;
  static SampleRng make(uint64_t seed, int64_t epoch, int64_t position);
  double uniform(int draw) const;                // [0, 1), 53 bits
  uint64_t below(int draw, uint64_t n) const;  // [0, n)
};

// Draw 0 is the flip; draws 1.. belong to the crop.
CropBox random_resized_crop_box(ImageSize size, CropStyle style, const SampleRng& rng);
bool random_flip(const SampleRng& rng);  // p = 0.5
// The square of side crop/resize * min(h, w) centred in the image: equal to resizing the
// short side to `resize` and centre-cropping `crop`.
CropBox center_crop_box(ImageSize size, int resize = 256, int crop = 224);

// `box` in the coordinates of the same image stored at size `from` and decoded at size `to`.
CropBox scale_box(const CropBox& box, ImageSize from, ImageSize to);
// The smallest decoded size at which `box` still has at least out_h x out_w source pixels.
ImageSize min_decode_size(ImageSize stored, const CropBox& box, int out_h, int out_w);

// out = (pixel - mean) / std per channel.
struct Normalize {
  float mean[3] = {123.68f, 116.78f, 103.94f};
  float std[3] = {1.0f, 1.0f, 1.0f};
  // The MLPerf reference subtracts the mean only; with_std also divides by the ImageNet std.
  static Normalize mlperf(bool with_std);
};

// Reusable buffers for resample_box (one per thread).
struct ResampleScratch {
  std::vector<float> rows;                  // (rows, out_w, 3) after the horizontal pass
  std::vector<float> wx, wy;                // filter taps per output column / row
  std::vector<int> x_start, x_count, y_start, y_count;
};

// Resamples `box` of `src` to (out_h, out_w, 3) floats with a triangle filter whose support
// grows with the downscale factor (PIL's antialiased BILINEAR), mirrors it if `flip`, and
// normalizes. out: (out_h, out_w, 3).
void resample_box(const Image& src, const CropBox& box, int out_h, int out_w, bool flip,
                  const Normalize& norm, float* out, ResampleScratch& scratch);

}  // namespace kiln::data
