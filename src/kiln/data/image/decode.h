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
// 8-bit RGB. Throws kiln::Error naming `path` for empty, truncated or unrecognised data.
void decode_image(std::span<const uint8_t> bytes, const std::string& path, Image& out,
                  const MinDecodeSize& min_size = {});

// Reads `path` into `buffer` (reused) and decodes it.
void decode_image_file(const std::filesystem::path& path, std::vector<uint8_t>& buffer, Image& out,
                       const MinDecodeSize& min_size = {});

// The libjpeg scale numerator n (of n/8) for a `stored` image that must stay >= `min` per side.
int jpeg_scale_numerator(ImageSize stored, ImageSize min);

// Internal to decode.cc; one per format.
void decode_jpeg(std::span<const uint8_t> bytes, const std::string& path, Image& out,
                 const MinDecodeSize& min_size);
void decode_png(std::span<const uint8_t> bytes, const std::string& path, Image& out);

}  // namespace kiln::data
