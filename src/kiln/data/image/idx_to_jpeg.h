// data/image/idx_to_jpeg.h — IDX (MNIST / Fashion-MNIST, optionally gzipped) to JPEG folders.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::data {

struct IdxImages {
  int count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // (count, rows, cols)
};

// Magic 0x803 (images) / 0x801 (labels); gzip or plain. Throws kiln::Error naming the file and the
// header field before allocating when the header claims more data than the file holds (a plain
// file) or can expand to (gzip, 1032:1 at most); memory grows only with the bytes actually read.
IdxImages read_idx_images(const std::filesystem::path& path, int limit = -1);
std::vector<uint8_t> read_idx_labels(const std::filesystem::path& path, int limit = -1);

std::vector<std::string> fashion_mnist_class_names();

// Writes out_dir/<class name>/<index, 5 digits>.JPEG (gray, `quality`) for the first `limit`
// images (all if < 0). Returns the number written.
int64_t write_idx_as_jpeg_folders(const std::filesystem::path& images, const std::filesystem::path& labels,
                                  const std::filesystem::path& out_dir, int limit,
                                  const std::vector<std::string>& class_names, int quality = 95);

}  // namespace kiln::data
