// fuzz/idx_fuzz.cc — data::read_idx_images and data::read_idx_labels (plain, or gzip when the
// bytes start with its magic) on arbitrary bytes, with and without a --limit. A header claiming
// more than the file holds must be a kiln::Error before any allocation of that size (the run's
// -rss_limit_mb turns an allocation into a failure).
#include "fuzz/fuzz_util.h"
#include "kiln/data/image/idx_to_jpeg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = kiln::fuzz::write_temp("input-idx-ubyte", data, size);
  for (const int limit : {-1, 3}) {
    try {
      const kiln::data::IdxImages images = kiln::data::read_idx_images(path, limit);
      if (images.pixels.size() != size_t(images.count) * size_t(images.rows) * size_t(images.cols)) __builtin_trap();
      kiln::fuzz::touch(images.pixels.data(), images.pixels.size());
    } catch (const kiln::Error&) {
    }
    try {
      const std::vector<uint8_t> labels = kiln::data::read_idx_labels(path, limit);
      kiln::fuzz::touch(labels.data(), labels.size());
    } catch (const kiln::Error&) {
    }
  }
  return 0;
}
