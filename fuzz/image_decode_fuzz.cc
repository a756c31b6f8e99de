// fuzz/image_decode_fuzz.cc — data::decode_image (JPEG / PNG) on arbitrary bytes, at full size
// and with a DCT-domain downscale.
#include <span>

#include "fuzz/fuzz_util.h"
#include "kiln/data/image/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::data;
  const std::span<const uint8_t> bytes(data, size);
  Image image;
  for (int pass = 0; pass < 2; ++pass) {
    try {
      const MinDecodeSize half = [](ImageSize s) { return ImageSize{s.height / 2, s.width / 2}; };
      decode_image(bytes, "fuzz.img", image, pass == 0 ? MinDecodeSize{} : half);
      if (image.pixels.size() != size_t(image.height) * size_t(image.width) * 3) __builtin_trap();
      kiln::fuzz::touch(image.pixels.data(), image.pixels.size());
    } catch (const kiln::Error&) {
    }
  }
  return 0;
}
