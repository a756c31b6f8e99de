// data/image/transforms.cc — crop boxes and PIL-style antialiased bilinear resampling.
#include "kiln/data/image/transforms.h"

#include <algorithm>
#include <cmath>

#include "kiln/core/error.h"

namespace kiln::data {
namespace {

constexpr uint32_t kAugmentLayer = 200;
constexpr int kDrawsPerSample = 512;

// torchvision's fallback; tinygrad's is the eval centre crop.
CropBox torchvision_fallback(ImageSize size) {
  const double w = size.width, h = size.height, ratio = w / h;
  double cw = w, ch = h;
  if (ratio < 3.0 / 4.0) {
    ch = std::round(cw / (3.0 / 4.0));
  } else if (ratio > 4.0 / 3.0) {
    cw = std::round(ch * (4.0 / 3.0));
  }
  const double x0 = std::floor((w - cw) / 2), y0 = std::floor((h - ch) / 2);  // int((w - cw) / 2)
  return {x0, y0, x0 + cw, y0 + ch};
}

// Taps of a triangle filter for each output coordinate: PIL's precompute_coeffs with
// support 1 scaled by max(scale, 1).
int filter_taps(double in0, double in1, int in_size, int out_size, std::vector<float>& weights,
                std::vector<int>& start, std::vector<int>& count) {
  const double scale = (in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = filterscale;
  const int ksize = int(std::ceil(support)) * 2 + 1;
  weights.assign(size_t(out_size) * ksize, 0.0f);
  start.resize(size_t(out_size));
  count.resize(size_t(out_size));
  for (int i = 0; i < out_size; ++i) {
    const double center = in0 + (i + 0.5) * scale;
    const int lo = std::max(int(center - support + 0.5), 0);
    const int n = std::min(int(center + support + 0.5), in_size) - lo;
    const auto tap = [&](int k) { return std::max(0.0, 1.0 - std::abs((k + lo - center + 0.5) / filterscale)); };
    double total = 0;
    for (int k = 0; k < n; ++k) total += tap(k);
    KILN_CHECK(n > 0 && total > 0, "resample: crop box [{}, {}) outside the image (size {})", in0, in1, in_size);
    for (int k = 0; k < n; ++k) weights[size_t(i) * ksize + k] = float(tap(k) / total);
    start[i] = lo;
    count[i] = n;
  }
  return ksize;
}

}  // namespace

SampleRng SampleRng::make(uint64_t seed, int64_t epoch, int64_t position) {
  return {RngStream{seed, rng_stream(RngPurpose::data, kAugmentLayer, uint64_t(epoch))},
          uint64_t(position) * kDrawsPerSample};
}

double SampleRng::uniform(int draw) const {
  const auto b = stream.block(base + uint64_t(draw));
  return double((uint64_t(b[0]) << 21) ^ (b[1] >> 11)) * (1.0 / 9007199254740992.0);
}

uint64_t SampleRng::below(int draw, uint64_t n) const { return stream.below(base + uint64_t(draw), n); }

CropBox random_resized_crop_box(ImageSize size, CropStyle style, const SampleRng& rng) {
  const double w = size.width, h = size.height;
  const bool tinygrad = style == CropStyle::tinygrad;
  const int attempts = tinygrad ? 100 : 10;
  for (int a = 0; a < attempts; ++a) {
    const int draw = 1 + 4 * a;
    double ratio, area;
    if (tinygrad) {
      ratio = 3.0 / 4.0 + rng.uniform(draw) * (4.0 / 3.0 - 3.0 / 4.0);
      const double max_scale = std::min({w * ratio / h, h / (ratio * w), 1.0});
      area = w * h * (0.10 + rng.uniform(draw + 1) * (max_scale - 0.10));
    } else {
      const double lo = std::log(3.0 / 4.0), hi = std::log(4.0 / 3.0);
      ratio = std::exp(lo + rng.uniform(draw) * (hi - lo));
      area = w * h * (0.08 + rng.uniform(draw + 1) * (1.0 - 0.08));
    }
    const double cw = std::round(std::sqrt(area * ratio)), ch = std::round(std::sqrt(area / ratio));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      const double x0 = double(rng.below(draw + 2, uint64_t(w - cw) + 1));
      const double y0 = double(rng.below(draw + 3, uint64_t(h - ch) + 1));
      return {x0, y0, x0 + cw, y0 + ch};
    }
  }
  return tinygrad ? center_crop_box(size) : torchvision_fallback(size);
}

bool random_flip(const SampleRng& rng) { return rng.uniform(0) < 0.5; }

CropBox center_crop_box(ImageSize size, int resize, int crop) {
  const double side = double(crop) / resize * std::min(size.width, size.height);
  const double x0 = (size.width - side) / 2, y0 = (size.height - side) / 2;
  return {x0, y0, x0 + side, y0 + side};
}

CropBox scale_box(const CropBox& box, ImageSize from, ImageSize to) {
  const double sx = double(to.width) / from.width, sy = double(to.height) / from.height;
  return {box.x0 * sx, box.y0 * sy, box.x1 * sx, box.y1 * sy};
}

ImageSize min_decode_size(ImageSize stored, const CropBox& box, int out_h, int out_w) {
  return {int(std::ceil(stored.height * double(out_h) / box.height() - 1e-9)),
          int(std::ceil(stored.width * double(out_w) / box.width() - 1e-9))};
}

Normalize Normalize::mlperf(bool with_std) {
  Normalize n;
  if (with_std) {
    n.std[0] = 58.393f;
    n.std[1] = 57.12f;
    n.std[2] = 57.375f;
  }
  return n;
}

void resample_box(const Image& src, const CropBox& box, int out_h, int out_w, bool flip,
                  const Normalize& norm, float* out, ResampleScratch& s) {
  const int kx = filter_taps(box.x0, box.x1, src.width, out_w, s.wx, s.x_start, s.x_count);
  const int ky = filter_taps(box.y0, box.y1, src.height, out_h, s.wy, s.y_start, s.y_count);
  const int row0 = s.y_start.front();
  const int rows = s.y_start.back() + s.y_count.back() - row0;

  // Horizontal pass over only the source rows the vertical taps touch: (rows, out_w, 3).
  s.rows.resize(size_t(rows) * out_w * 3);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* in = src.pixels.data() + size_t(row0 + r) * src.width * 3;
    float* dst = s.rows.data() + size_t(r) * out_w * 3;
    for (int x = 0; x < out_w; ++x) {
      const float* w = s.wx.data() + size_t(x) * kx;
      const uint8_t* p = in + size_t(s.x_start[x]) * 3;
      float a0 = 0, a1 = 0, a2 = 0;
      for (int k = 0; k < s.x_count[x]; ++k, p += 3) {
        a0 += w[k] * p[0];
        a1 += w[k] * p[1];
        a2 += w[k] * p[2];
      }
      float* d = dst + size_t(flip ? out_w - 1 - x : x) * 3;
      d[0] = a0;
      d[1] = a1;
      d[2] = a2;
    }
  }

  // Vertical pass, fused with normalization: (out_h, out_w, 3).
  const float inv_std[3] = {1.0f / norm.std[0], 1.0f / norm.std[1], 1.0f / norm.std[2]};
  const int n = out_w * 3;
  for (int y = 0; y < out_h; ++y) {
    float* dst = out + size_t(y) * n;
    const float* w = s.wy.data() + size_t(y) * ky;
    const float* first = s.rows.data() + size_t(s.y_start[y] - row0) * n;
    for (int i = 0; i < n; ++i) dst[i] = 0.0f;
    for (int k = 0; k < s.y_count[y]; ++k) {
      const float* in = first + size_t(k) * n;
      const float wk = w[k];
      for (int i = 0; i < n; ++i) dst[i] += wk * in[i];
    }
    for (int i = 0; i < n; i += 3) {
      dst[i] = (dst[i] - norm.mean[0]) * inv_std[0];
      dst[i + 1] = (dst[i + 1] - norm.mean[1]) * inv_std[1];
      dst[i + 2] = (dst[i + 2] - norm.mean[2]) * inv_std[2];
    }
  }
}

}  // namespace kiln::data
