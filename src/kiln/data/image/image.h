// data/image/image.h — a decoded 8-bit RGB image.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::data {

struct ImageSize {
  int height = 0, width = 0;
};

struct Image {
  int height = 0, width = 0;            // decoded size (after DCT-domain downscaling)
  int orig_height = 0, orig_width = 0;  // size stored in the file
  std::vector<uint8_t> pixels;          // (height, width, 3) RGB
};

}  // namespace kiln::data
