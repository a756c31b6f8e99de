// data/image/idx_to_jpeg.cc — gz IDX reading (zlib) and JPEG folder writing.
#include "kiln/data/image/idx_to_jpeg.h"

#include <fmt/format.h>
#include <zlib.h>

#include <memory>

#include "kiln/core/error.h"
#include "kiln/data/image/jpeg_encode.h"

namespace kiln::data {
namespace {

// gzread reads plain files unchanged, so this handles both.
class GzFile {
 public:
  explicit GzFile(const std::filesystem::path& path) : path_(path.string()), file_(gzopen(path_.c_str(), "rb")) {
    KILN_CHECK(file_, "IDX file {}: cannot open", path_);
  }
  ~GzFile() { gzclose(file_); }
  void read(void* data, size_t size) {
    KILN_CHECK(gzread(file_, data, unsigned(size)) == int(size), "IDX file {}: truncated or corrupt", path_);
  }
  uint32_t read_u32() {
    uint8_t b[4];
    read(b, 4);
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile file_;
};

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& path, int limit) {
  GzFile in(path);
  const uint32_t magic = in.read_u32();
  KILN_CHECK(magic == 0x803, "IDX file {}: magic {:#x}, expected 0x803 (uint8 images)", in.path(), magic);
  IdxImages images;
  images.count = int(in.read_u32());
  images.rows = int(in.read_u32());
  images.cols = int(in.read_u32());
  KILN_CHECK(images.rows > 0 && images.cols > 0 && images.rows <= 4096 && images.cols <= 4096,
             "IDX file {}: bad image size {}x{}", in.path(), images.rows, images.cols);
  if (limit >= 0) images.count = std::min(images.count, limit);
  images.pixels.resize(size_t(images.count) * images.rows * images.cols);
  in.read(images.pixels.data(), images.pixels.size());
  return images;
}

std::vector<uint8_t> read_idx_labels(const std::filesystem::path& path, int limit) {
  GzFile in(path);
  const uint32_t magic = in.read_u32();
  KILN_CHECK(magic == 0x801, "IDX file {}: magic {:#x}, expected 0x801 (uint8 labels)", in.path(), magic);
  int count = int(in.read_u32());
  if (limit >= 0) count = std::min(count, limit);
  std::vector<uint8_t> labels(size_t(count), 0);
  in.read(labels.data(), labels.size());
  return labels;
}

std::vector<std::string> fashion_mnist_class_names() {
  return {"T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"};
}

int64_t write_idx_as_jpeg_folders(const std::filesystem::path& images_path, const std::filesystem::path& labels_path,
                                  const std::filesystem::path& out_dir, int limit,
                                  const std::vector<std::string>& class_names, int quality) {
  const IdxImages images = read_idx_images(images_path, limit);
  const std::vector<uint8_t> labels = read_idx_labels(labels_path, limit);
  KILN_CHECK(labels.size() == size_t(images.count), "IDX files {} and {}: {} images but {} labels",
             images_path.string(), labels_path.string(), images.count, labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    KILN_CHECK(labels[i] < class_names.size(), "IDX file {}: label {} of image {} has no class name ({} given)",
               labels_path.string(), labels[i], i, class_names.size());
  }
  for (const std::string& name : class_names) std::filesystem::create_directories(out_dir / name);
  const size_t stride = size_t(images.rows) * images.cols;
  for (int i = 0; i < images.count; ++i) {
    write_jpeg(out_dir / class_names[labels[size_t(i)]] / fmt::format("{:05d}.JPEG", i),
               images.pixels.data() + size_t(i) * stride, images.rows, images.cols, 1, quality);
  }
  return images.count;
}

}  // namespace kiln::data
