// data/image/decode.h — JPEG (libjpeg-turbo) and PNG (libpng) decoding to 8-bit RGB.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kiln/data/image/image.h"

namespace kiln::data {

// Given the size stored in the file, the smallest decoded size the caller can use. JPEGs are
// decoded at the largest DCT-domain reduction n/8 (n = 1..8) that keeps both sides at least
// that large; PNGs are always decoded at full size. Called once per decode, with the stored size.
using MinDecodeSize = std::function<ImageSize(ImageSize stored)>;

// Decodes `bytes` (format sniffed from the magic, not the file name) into `out`, reusing its
// buffer. Grayscale, CMYK/YCCK (Adobe-inverted too), palette, alpha and 16-bit inputs become
// 8-bit RGB. Throws kiln::Error naming `path` for empty, truncated, unrecognised or oversized
// data (never another exception type, so loader threads can count or report it).
void decode_image(std::span<const uint8_t> bytes, const std::string& path, Image& out,
                  const MinDecodeSize& min_size = {});

// Reads `path` into `buffer` (reused) and decodes it.
void decode_image_file(const std::filesystem::path& path, std::vector<uint8_t>& buffer, Image& out,
                       const MinDecodeSize& min_size = {});

// Images whose stored size exceeds this many pixels are refused before any pixel memory is
// allocated (a 242-byte JPEG can claim 65000 x 65000). Default 89,478,485 (Pillow's
// decompression-bomb limit, about 9459 x 9459); the environment variable
// KILN_MAX_IMAGE_PIXELS overrides it; set_max_image_pixels wins over both.
int64_t max_image_pixels();
void set_max_image_pixels(int64_t pixels);

// The libjpeg scale numerator n (of n/8) for a `stored` image that must stay >= `min` per side.
int jpeg_scale_numerator(ImageSize stored, ImageSize min);

// Internal to decode.cc; one per format. Each refuses images above max_image_pixels().
void decode_known_format(std::span<const uint8_t> bytes, const std::string& path, Image& out,
                         const MinDecodeSize& min_size);
void decode_jpeg(std::span<const uint8_t> bytes, const std::string& path, Image& out,
                 const MinDecodeSize& min_size);
void decode_png(std::span<const uint8_t> bytes, const std::string& path, Image& out);
[[noreturn]] void throw_too_large(const std::string& path, ImageSize stored);

}  // namespace kiln::data
