// Decoding: formats, colour conversions, DCT-domain scaling and bad files.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/core/error.h"
#include "kiln/data/image/decode.h"
#include "tests/data/image/image_test_util.h"

namespace kiln::data {
namespace {

using testing::fresh_temp_dir;
using testing::smooth_pixels;

double mean_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return sum / double(a.size());
}

Image decode_bytes(const std::vector<uint8_t>& bytes, const MinDecodeSize& min = {}) {
  Image image;
  decode_image(bytes, "mem.jpg", image, min);
  return image;
}

std::string decode_error(const std::filesystem::path& path) {
  std::vector<uint8_t> buffer;
  Image image;
  try {
    decode_image_file(path, buffer, image);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ImageDecode, RgbJpegRoundTrips) {
  const auto pixels = smooth_pixels(48, 64, 3);
  const Image image = decode_bytes(encode_jpeg(pixels.data(), 48, 64, 3, 100));
  EXPECT_EQ(image.height, 48);
  EXPECT_EQ(image.width, 64);
  EXPECT_LT(mean_abs_diff(image.pixels, pixels), 1.5);
}

TEST(ImageDecode, GrayJpegBecomesEqualRgbChannels) {
  const auto gray = smooth_pixels(30, 20, 1);
  const Image image = decode_bytes(encode_jpeg(gray.data(), 30, 20, 1, 100));
  std::vector<uint8_t> expected;
  for (const uint8_t v : gray) expected.insert(expected.end(), {v, v, v});
  EXPECT_LT(mean_abs_diff(image.pixels, expected), 1.0);
  for (size_t i = 0; i < image.pixels.size(); i += 3) {
    ASSERT_EQ(image.pixels[i], image.pixels[i + 1]);
    ASSERT_EQ(image.pixels[i], image.pixels[i + 2]);
  }
}

TEST(ImageDecode, CmykAndYcckJpegsBecomeRgb) {
  const int h = 24, w = 32;
  const auto cmyk = smooth_pixels(h, w, 4);
  for (const bool adobe : {true, false}) {
    for (const bool ycck : {false, true}) {
      if (ycck && !adobe) continue;  // YCCK needs the Adobe marker to be recognised
      std::vector<uint8_t> expected;
      for (size_t i = 0; i < cmyk.size(); i += 4) {
        for (int c = 0; c < 3; ++c) {
          // Adobe stores inverted inks: RGB = C*K/255; plain CMYK: (255-C)(255-K)/255.
          const double v = adobe ? cmyk[i + c] * cmyk[i + 3] / 255.0 : (255.0 - cmyk[i + c]) * (255.0 - cmyk[i + 3]) / 255.0;
          expected.push_back(uint8_t(std::lround(v)));
        }
      }
      const Image image = decode_bytes(testing::encode_cmyk_jpeg(cmyk, h, w, adobe, ycck));
      EXPECT_EQ(image.width, w);
      EXPECT_LT(mean_abs_diff(image.pixels, expected), 2.0) << "adobe " << adobe << " ycck " << ycck;
    }
  }
}

TEST(ImageDecode, PngDisguisedAsJpegIsDecodedByItsMagic) {
  const auto dir = fresh_temp_dir("png");
  const int h = 5, w = 7;
  // RGBA 8-bit: alpha is dropped, colours exact.
  const auto rgba = smooth_pixels(h, w, 4);
  testing::write_png(dir / "rgba.JPEG", rgba, h, w, PNG_COLOR_TYPE_RGB_ALPHA, 8);
  std::vector<uint8_t> buffer;
  Image image;
  decode_image_file(dir / "rgba.JPEG", buffer, image);
  ASSERT_EQ(image.pixels.size(), size_t(h * w * 3));
  for (int i = 0; i < h * w; ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(image.pixels[i * 3 + c], rgba[i * 4 + c]);
  }
  // 16-bit gray: high byte, replicated.
  std::vector<uint8_t> gray16(size_t(h) * w * 2);
  for (size_t i = 0; i < gray16.size(); ++i) gray16[i] = uint8_t(i * 37 + 11);
  testing::write_png(dir / "gray16.png", gray16, h, w, PNG_COLOR_TYPE_GRAY, 16);
  decode_image_file(dir / "gray16.png", buffer, image);
  for (int i = 0; i < h * w; ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(image.pixels[i * 3 + c], gray16[i * 2]);
  }
  // Palette.
  const std::vector<png_color> palette = {{10, 20, 30}, {200, 100, 0}, {1, 2, 3}};
  std::vector<uint8_t> indices(size_t(h) * w);
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = uint8_t(i % 3);
  testing::write_png(dir / "palette.png", indices, h, w, PNG_COLOR_TYPE_PALETTE, 8, palette);
  decode_image_file(dir / "palette.png", buffer, image);
  for (int i = 0; i < h * w; ++i) {
    const png_color& p = palette[indices[size_t(i)]];
    ASSERT_EQ(image.pixels[i * 3], p.red);
    ASSERT_EQ(image.pixels[i * 3 + 1], p.green);
    ASSERT_EQ(image.pixels[i * 3 + 2], p.blue);
  }
}

TEST(ImageDecode, DctScalingPicksTheLargestReductionThatKeepsTheMinimumSize) {
  EXPECT_EQ(jpeg_scale_numerator({600, 800}, {100, 100}), 2);  // 150x200; 1/8 would be 75x100
  EXPECT_EQ(jpeg_scale_numerator({600, 800}, {75, 100}), 1);
  EXPECT_EQ(jpeg_scale_numerator({600, 800}, {76, 10}), 2);
  EXPECT_EQ(jpeg_scale_numerator({600, 800}, {700, 10}), 8);  // never upscales
  EXPECT_EQ(jpeg_scale_numerator({599, 801}, {75, 0}), 1);    // ceil(599/8) = 75

  const auto pixels = smooth_pixels(600, 800, 3);
  const auto bytes = encode_jpeg(pixels.data(), 600, 800, 3, 95);
  ImageSize seen;
  const Image image = decode_bytes(bytes, [&](ImageSize s) {
    seen = s;
    return ImageSize{100, 100};
  });
  EXPECT_EQ(seen.height, 600);
  EXPECT_EQ(seen.width, 800);
  EXPECT_EQ(image.orig_height, 600);
  EXPECT_EQ(image.height, 150);
  EXPECT_EQ(image.width, 200);
  // Each output pixel is close to the mean of its 4x4 source block.
  double err = 0;
  for (int y = 0; y < 150; ++y) {
    for (int x = 0; x < 200; ++x) {
      for (int c = 0; c < 3; ++c) {
        double mean = 0;
        for (int dy = 0; dy < 4; ++dy) {
          for (int dx = 0; dx < 4; ++dx) mean += pixels[(size_t(y * 4 + dy) * 800 + x * 4 + dx) * 3 + c];
        }
        err += std::abs(mean / 16 - image.pixels[(size_t(y) * 200 + x) * 3 + c]);
      }
    }
  }
  EXPECT_LT(err / (150 * 200 * 3), 2.5);
}

TEST(ImageDecode, BadFilesAreErrorsNamingThePath) {
  const auto dir = fresh_temp_dir("bad");
  const auto pixels = smooth_pixels(64, 64, 3);
  auto bytes = encode_jpeg(pixels.data(), 64, 64, 3, 95);
  bytes.resize(bytes.size() / 2);
  testing::write_bytes(dir / "truncated.JPEG", bytes);
  testing::write_bytes(dir / "empty.JPEG", {});
  testing::write_text(dir / "text.JPEG", "this is not an image\n");
  testing::write_bytes(dir / "png_truncated.png", [&] {
    testing::write_png(dir / "full.png", pixels, 64, 64, PNG_COLOR_TYPE_RGB, 8);
    auto png = testing::read_bytes(dir / "full.png");
    png.resize(png.size() / 2);
    return png;
  }());
  const std::string truncated = decode_error(dir / "truncated.JPEG");
  EXPECT_NE(truncated.find((dir / "truncated.JPEG").string()), std::string::npos) << truncated;
  EXPECT_NE(truncated.find("Premature end"), std::string::npos) << truncated;
  EXPECT_EQ(decode_error(dir / "empty.JPEG"), "image " + (dir / "empty.JPEG").string() + ": file is empty");
  EXPECT_NE(decode_error(dir / "text.JPEG").find((dir / "text.JPEG").string() + ": not a JPEG or PNG"),
            std::string::npos);
  EXPECT_NE(decode_error(dir / "png_truncated.png").find((dir / "png_truncated.png").string() + ": PNG"),
            std::string::npos);
  EXPECT_NE(decode_error(dir / "missing.JPEG").find("missing.JPEG: cannot open"), std::string::npos);
}

// The fuzzer's find: a tiny JPEG whose frame header claims 65000 x 65000 pixels (12.7 GB of
// RGB). It must be refused before any pixel memory is allocated, naming the file.
std::vector<uint8_t> jpeg_claiming(int height, int width) {
  const auto pixels = smooth_pixels(16, 16, 3);
  auto bytes = encode_jpeg(pixels.data(), 16, 16, 3, 90);
  for (size_t i = 0; i + 8 < bytes.size(); ++i)
    if (bytes[i] == 0xff && bytes[i + 1] == 0xc0) {  // SOF0: length(2) precision(1) H(2) W(2)
      bytes[i + 5] = uint8_t(height >> 8), bytes[i + 6] = uint8_t(height);
      bytes[i + 7] = uint8_t(width >> 8), bytes[i + 8] = uint8_t(width);
      return bytes;
    }
  ADD_FAILURE() << "no SOF0 marker";
  return bytes;
}

TEST(ImageDecode, ImagesClaimingMorePixelsThanTheLimitAreRefusedBeforeAllocating) {
  const auto dir = fresh_temp_dir("huge");
  testing::write_bytes(dir / "bomb.JPEG", jpeg_claiming(65000, 65000));
  const std::string message = decode_error(dir / "bomb.JPEG");
  EXPECT_NE(message.find((dir / "bomb.JPEG").string()), std::string::npos) << message;
  EXPECT_NE(message.find("65000 x 65000 pixels exceeds the limit"), std::string::npos) << message;

  // The limit is configurable: a normal image above a lowered limit is refused too (PNG here).
  const auto pixels = smooth_pixels(40, 30, 3);
  testing::write_png(dir / "small.png", pixels, 40, 30, PNG_COLOR_TYPE_RGB, 8);
  const int64_t saved = max_image_pixels();
  set_max_image_pixels(1000);
  const std::string png_message = decode_error(dir / "small.png");
  set_max_image_pixels(saved);
  EXPECT_NE(png_message.find("30 x 40 pixels exceeds the limit of 1000"), std::string::npos) << png_message;
  EXPECT_EQ(decode_error(dir / "small.png"), "no error");
}

}  // namespace
}  // namespace kiln::data
