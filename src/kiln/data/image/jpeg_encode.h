// data/image/jpeg_encode.h — libjpeg encoding of 8-bit gray or RGB pixels.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

namespace kiln::data {

// pixels: (height, width, channels) with channels 1 (gray JPEG) or 3 (YCbCr JPEG).
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int height, int width, int channels,
                                 int quality = 95);

// encode_jpeg, then write `path` (plainly: the outputs are regenerable, thousands of small files).
void write_jpeg(const std::filesystem::path& path, const uint8_t* pixels, int height, int width,
                int channels, int quality = 95);

}  // namespace kiln::data
