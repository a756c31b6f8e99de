// Crop boxes (bounds and distributions), flips, and the resample against a float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kiln/data/image/transforms.h"

namespace kiln::data {
namespace {

constexpr int kDraws = 20000;

// Direct float64 antialiased bilinear: output pixel (i, j) averages source pixels with a
// triangle weight of width max(scale, 1) around its centre, normalised.
std::vector<double> reference_resample(const Image& src, const CropBox& box, int out_h, int out_w, bool flip,
                                       const Normalize& norm) {
  const auto weights = [](double in0, double in1, int in_size, int out_size, int i) {
    const double scale = (in1 - in0) / out_size, fs = std::max(scale, 1.0);
    const double center = in0 + (i + 0.5) * scale;
    std::vector<double> w(size_t(in_size), 0.0);
    double total = 0;
    for (int p = 0; p < in_size; ++p) {
      w[size_t(p)] = std::max(0.0, 1.0 - std::abs(p + 0.5 - center) / fs);
      total += w[size_t(p)];
    }
    for (double& v : w) v /= total;
    return w;
  };
  std::vector<double> out(size_t(out_h) * out_w * 3);
  for (int i = 0; i < out_h; ++i) {
    const auto wy = weights(box.y0, box.y1, src.height, out_h, i);
    for (int j = 0; j < out_w; ++j) {
      const auto wx = weights(box.x0, box.x1, src.width, out_w, flip ? out_w - 1 - j : j);
      for (int c = 0; c < 3; ++c) {
        double v = 0;
        for (int y = 0; y < src.height; ++y) {
          if (wy[size_t(y)] == 0) continue;
          for (int x = 0; x < src.width; ++x) v += wy[size_t(y)] * wx[size_t(x)] * src.pixels[(size_t(y) * src.width + x) * 3 + c];
        }
        out[(size_t(i) * out_w + j) * 3 + c] = (v - norm.mean[c]) / norm.std[c];
      }
    }
  }
  return out;
}

Image random_image(int h, int w, uint32_t seed) {
  std::mt19937 gen(seed);
  Image image{h, w, h, w, std::vector<uint8_t>(size_t(h) * w * 3)};
  for (uint8_t& p : image.pixels) p = uint8_t(gen() & 255);
  return image;
}

double max_abs_error(const Image& src, const CropBox& box, int out_h, int out_w, bool flip, const Normalize& norm) {
  std::vector<float> out(size_t(out_h) * out_w * 3);
  ResampleScratch scratch;
  resample_box(src, box, out_h, out_w, flip, norm, out.data(), scratch);
  const auto ref = reference_resample(src, box, out_h, out_w, flip, norm);
  double err = 0;
  for (size_t i = 0; i < out.size(); ++i) err = std::max(err, std::abs(out[i] - ref[i]));
  return err;
}

TEST(ImageTransforms, CenterCropBoxIsShortSide256ThenCentre224) {
  const CropBox box = center_crop_box({375, 500});
  EXPECT_DOUBLE_EQ(box.width(), 375 * 224.0 / 256);
  EXPECT_DOUBLE_EQ(box.height(), 375 * 224.0 / 256);
  EXPECT_DOUBLE_EQ(box.x0, (500 - 328.125) / 2);
  EXPECT_DOUBLE_EQ(box.y0, (375 - 328.125) / 2);
}

TEST(ImageTransforms, EvalResampleMatchesFloat64Reference) {
  const Normalize mean_only = Normalize::mlperf(false);
  const Image wide = random_image(120, 170, 1);  // shrink: antialiased taps span several pixels
  EXPECT_LT(max_abs_error(wide, center_crop_box({120, 170}, 64, 56), 56, 56, false, mean_only), 2e-3);
  const Image small = random_image(30, 41, 2);  // enlarge: plain bilinear
  EXPECT_LT(max_abs_error(small, center_crop_box({30, 41}, 64, 56), 56, 56, false, mean_only), 2e-3);
  // Train-style: integer box, flip, std division, non-square output.
  EXPECT_LT(max_abs_error(wide, {13, 7, 113, 97}, 40, 36, true, Normalize::mlperf(true)), 1e-4);
}

TEST(ImageTransforms, EvalResample224MatchesReference) {
  const Image image = random_image(300, 260, 3);
  EXPECT_LT(max_abs_error(image, center_crop_box({300, 260}), 224, 224, false, Normalize::mlperf(false)), 2e-3);
}

TEST(ImageTransforms, CropBoxesStayInsideTheImage) {
  for (const CropStyle style : {CropStyle::tinygrad, CropStyle::torchvision}) {
    for (int i = 0; i < 4000; ++i) {
      const ImageSize size{1 + int(i * 7919 % 600), 1 + int(i * 104729 % 900)};
      const CropBox b = random_resized_crop_box(size, style, SampleRng::make(5, 0, i));
      ASSERT_GE(b.x0, 0);
      ASSERT_GE(b.y0, 0);
      ASSERT_LE(b.x1, size.width);
      ASSERT_LE(b.y1, size.height);
      ASSERT_GT(b.width(), 0);
      ASSERT_GT(b.height(), 0);
    }
  }
}

// Empirical CDF of the crop area fraction on a 1000x1000 image against the distribution
// integrated numerically from the definition of each style.
TEST(ImageTransforms, TinygradCropAreaAndRatioFollowTheSpec) {
  std::vector<double> fractions, ratios;
  for (int i = 0; i < kDraws; ++i) {
    const CropBox b = random_resized_crop_box({1000, 1000}, CropStyle::tinygrad, SampleRng::make(11, 3, i));
    fractions.push_back(b.width() * b.height() / 1e6);
    ratios.push_back(b.width() / b.height());
  }
  // a ~ U(3/4, 4/3); fraction | a ~ U(0.10, min(a, 1/a)).
  const auto expected_cdf = [](double t) {
    double p = 0;
    const int steps = 4000;
    for (int k = 0; k < steps; ++k) {
      const double a = 0.75 + (k + 0.5) / steps * (4.0 / 3.0 - 0.75), m = std::min(a, 1 / a);
      p += std::clamp((t - 0.10) / (m - 0.10), 0.0, 1.0) / steps;
    }
    return p;
  };
  for (const double t : {0.2, 0.4, 0.6, 0.8}) {
    const double empirical = double(std::count_if(fractions.begin(), fractions.end(), [&](double f) { return f <= t; })) / kDraws;
    EXPECT_NEAR(empirical, expected_cdf(t), 0.015) << "t " << t;
  }
  for (const double t : {0.85, 1.0, 1.2}) {  // ratio is linear-uniform on [3/4, 4/3]
    const double empirical = double(std::count_if(ratios.begin(), ratios.end(), [&](double r) { return r <= t; })) / kDraws;
    EXPECT_NEAR(empirical, (t - 0.75) / (4.0 / 3.0 - 0.75), 0.015) << "ratio " << t;
  }
}

TEST(ImageTransforms, TorchvisionCropAreaAndRatioFollowItsDefaults) {
  std::vector<double> fractions, log_ratios;
  for (int i = 0; i < kDraws; ++i) {
    const CropBox b = random_resized_crop_box({1000, 1000}, CropStyle::torchvision, SampleRng::make(12, 0, i));
    fractions.push_back(b.width() * b.height() / 1e6);
    log_ratios.push_back(std::log(b.width() / b.height()));
  }
  // (fraction, log r) uniform on [0.08, 1] x [log 3/4, log 4/3], accepted when the crop fits:
  // fraction <= min(r, 1/r). 10 attempts make the fallback negligible (< 1e-8).
  const double lo = std::log(0.75), hi = std::log(4.0 / 3.0);
  const auto mass = [&](double t, double lr_max) {
    double p = 0;
    const int steps = 4000;
    for (int k = 0; k < steps; ++k) {
      const double lr = lo + (k + 0.5) / steps * (hi - lo);
      if (lr > lr_max) continue;
      const double m = std::min(std::exp(lr), std::exp(-lr));
      p += std::max(0.0, std::min(t, m) - 0.08) / steps;
    }
    return p;
  };
  const double total = mass(1.0, hi);
  for (const double t : {0.2, 0.4, 0.6, 0.8}) {
    const double empirical = double(std::count_if(fractions.begin(), fractions.end(), [&](double f) { return f <= t; })) / kDraws;
    EXPECT_NEAR(empirical, mass(t, hi) / total, 0.015) << "t " << t;
  }
  for (const double t : {-0.2, 0.0, 0.15}) {
    const double empirical = double(std::count_if(log_ratios.begin(), log_ratios.end(), [&](double r) { return r <= t; })) / kDraws;
    EXPECT_NEAR(empirical, mass(1.0, t) / total, 0.015) << "log ratio " << t;
  }
}

TEST(ImageTransforms, TorchvisionFallbackWhenNoAttemptFits) {
  // A 3x200 strip: no crop of >= 8% area with ratio in [3/4, 4/3] fits.
  const CropBox tv = random_resized_crop_box({3, 200}, CropStyle::torchvision, SampleRng::make(1, 0, 0));
  EXPECT_DOUBLE_EQ(tv.height(), 3);
  EXPECT_DOUBLE_EQ(tv.width(), 4);  // round(3 * 4/3)
  EXPECT_DOUBLE_EQ(tv.x0, 98);
}

TEST(ImageTransforms, FlipProbabilityIsOneHalfAndDrawsAreReproducible) {
  int flips = 0;
  for (int i = 0; i < kDraws; ++i) flips += random_flip(SampleRng::make(9, 1, i));
  EXPECT_NEAR(double(flips) / kDraws, 0.5, 0.015);
  const SampleRng a = SampleRng::make(9, 1, 77), b = SampleRng::make(9, 1, 77), c = SampleRng::make(9, 2, 77);
  EXPECT_EQ(a.uniform(3), b.uniform(3));
  EXPECT_NE(a.uniform(3), c.uniform(3));
}

TEST(ImageTransforms, MinDecodeSizeKeepsTheCropAtOutputResolution) {
  const CropBox box{100, 50, 300, 450};  // 200 x 400 of a 600 x 800 image
  const ImageSize min = min_decode_size({600, 800}, box, 224, 224);
  EXPECT_EQ(min.height, 336);  // 600 * 224 / 400
  EXPECT_EQ(min.width, 896);   // 800 * 224 / 200: upscaling, so no reduction
  const CropBox scaled = scale_box(box, {600, 800}, {300, 400});
  EXPECT_DOUBLE_EQ(scaled.x0, 50);
  EXPECT_DOUBLE_EQ(scaled.y1, 225);
}

}  // namespace
}  // namespace kiln::data
