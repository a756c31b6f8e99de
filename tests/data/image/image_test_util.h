// tests/data/image/image_test_util.h — test images written directly with libjpeg / libpng.
#pragma once
#include <jpeglib.h>
#include <png.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/data/image/jpeg_encode.h"
#include "tests/data/data_test_util.h"

namespace kiln::data::testing {

// A smooth pattern (JPEG-friendly) with distinct channels: (h, w, channels).
inline std::vector<uint8_t> smooth_pixels(int h, int w, int channels, int phase = 0) {
  std::vector<uint8_t> p(size_t(h) * w * channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        const double v = 128 + 100 * std::sin(0.05 * (x + phase) * (c + 1) + 0.03 * y * (3 - c % 3) + c);
        p[(size_t(y) * w + x) * channels + c] = uint8_t(std::lround(v));
      }
    }
  }
  return p;
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A 4-component JPEG of `cmyk` (h, w, 4) stored as given; with `adobe` the Adobe marker
// (which tells readers the values are inverted) is written.
inline std::vector<uint8_t> encode_cmyk_jpeg(const std::vector<uint8_t>& cmyk, int h, int w, bool adobe, bool ycck) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* data = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &data, &size);
  cinfo.image_width = JDIMENSION(w);
  cinfo.image_height = JDIMENSION(h);
  cinfo.input_components = 4;
  cinfo.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, ycck ? JCS_YCCK : JCS_CMYK);
  cinfo.write_Adobe_marker = adobe ? TRUE : FALSE;
  jpeg_set_quality(&cinfo, 100, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(cmyk.data()) + size_t(cinfo.next_scanline) * w * 4;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> bytes(data, data + size);
  std::free(data);
  return bytes;
}

// A PNG file of `pixels` with libpng's color type and bit depth (16-bit samples big-endian).
inline void write_png(const std::filesystem::path& path, const std::vector<uint8_t>& pixels, int h, int w,
                      int color_type, int bit_depth, const std::vector<png_color>& palette = {}) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw std::runtime_error("cannot write " + path.string());
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, file);
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), bit_depth, color_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), int(palette.size()));
  png_write_info(png, info);
  const size_t stride = pixels.size() / size_t(h);
  for (int y = 0; y < h; ++y) png_write_row(png, pixels.data() + size_t(y) * stride);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(file);
}

// dir/<class>/<i>.JPEG images of assorted sizes; returns the number written.
inline int write_class_folders(const std::filesystem::path& dir, const std::vector<std::string>& classes,
                               int per_class) {
  int n = 0;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::filesystem::create_directories(dir / classes[c]);
    for (int i = 0; i < per_class; ++i, ++n) {
      const int h = 40 + 7 * ((n * 5) % 9), w = 40 + 9 * ((n * 7) % 8);
      const int channels = n % 4 == 3 ? 1 : 3;
      const auto pixels = smooth_pixels(h, w, channels, n * 13);
      write_jpeg(dir / classes[c] / ("img" + std::to_string(i) + ".JPEG"), pixels.data(), h, w, channels, 90);
    }
  }
  return n;
}

}  // namespace kiln::data::testing
