// data/image/idx_to_jpeg.cc — gz IDX reading (zlib) and JPEG folder writing.
#include "kiln/data/image/idx_to_jpeg.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "kiln/core/error.h"
#include "kiln/data/image/jpeg_encode.h"

namespace kiln::data {
namespace {

// The most a deflate stream expands: 1032 output bytes per input byte (zlib's technical details).
constexpr uint64_t kMaxDeflateRatio = 1032;
// Pixels and labels are read in pieces of this size, so memory grows with the bytes the file
// really holds, never with what its header claims (and gzread's int lengths are never exceeded).
constexpr size_t kReadChunk = size_t(64) << 20;

// gzread reads plain files unchanged, so this handles both.
class GzFile {
 public:
  explicit GzFile(const std::filesystem::path& path) : path_(path.string()), file_(gzopen(path_.c_str(), "rb")) {
    KILN_CHECK(file_, "IDX file {}: cannot open", path_);
    std::error_code ec;
    file_size_ = std::filesystem::file_size(path, ec);
    if (ec) {
      gzclose(file_);
      throw Error("IDX file {}: cannot read its size: {}", path_, ec.message());
    }
  }
  ~GzFile() { gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  void read(void* data, size_t size) {
    KILN_CHECK(gzread(file_, data, unsigned(size)) == int(size), "IDX file {}: truncated or corrupt", path_);
  }
  uint32_t read_u32() {
    uint8_t b[4];
    read(b, 4);
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
  }
  // Reads `size` bytes into `out`, growing it piece by piece as the data arrives.
  void read_vector(std::vector<uint8_t>& out, uint64_t size) {
    out.clear();
    while (out.size() < size) {
      const size_t at = out.size(), n = size_t(std::min<uint64_t>(kReadChunk, size - at));
      out.resize(at + n);
      read(out.data() + at, n);
    }
  }
  // Refuses a header whose `field` claims `bytes` of data after its `header_bytes`: more than a
  // plain file holds, or than a gzip file of this size can expand to.
  void check_claim(uint64_t bytes, uint64_t header_bytes, const std::string& field) {
    if (gzdirect(file_)) {
      const uint64_t held = file_size_ > header_bytes ? file_size_ - header_bytes : 0;
      KILN_CHECK(bytes <= held, "IDX file {}: header field {} needs {} bytes of data, but the file holds {} after its "
                 "{}-byte header", path_, field, bytes, held, header_bytes);
    } else {
      KILN_CHECK(bytes <= file_size_ * kMaxDeflateRatio,
                 "IDX file {}: header field {} needs {} bytes of data, more than a gzip file of {} bytes can hold",
                 path_, field, bytes, file_size_);
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile file_;
  uint64_t file_size_ = 0;
};

// An IDX count, which kiln holds as an int.
int checked_count(uint32_t count, const GzFile& in, const char* what) {
  KILN_CHECK(count <= uint32_t(std::numeric_limits<int>::max()), "IDX file {}: header field count: {} {} is more "
             "than {}", in.path(), count, what, std::numeric_limits<int>::max());
  return int(count);
}

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& path, int limit) {
  GzFile in(path);
  const uint32_t magic = in.read_u32();
  KILN_CHECK(magic == 0x803, "IDX file {}: magic {:#x}, expected 0x803 (uint8 images)", in.path(), magic);
  IdxImages images;
  images.count = checked_count(in.read_u32(), in, "images");
  const uint32_t rows = in.read_u32(), cols = in.read_u32();
  KILN_CHECK(rows > 0 && cols > 0 && rows <= 4096 && cols <= 4096,
             "IDX file {}: header fields rows x cols: bad image size {}x{} (1 to 4096 each)", in.path(), rows, cols);
  images.rows = int(rows);
  images.cols = int(cols);
  const uint64_t image_bytes = uint64_t(rows) * cols;  // <= 2^24, times a count < 2^31: no overflow
  in.check_claim(uint64_t(images.count) * image_bytes, 16,
                 fmt::format("count ({} images of {}x{})", images.count, rows, cols));
  if (limit >= 0) images.count = std::min(images.count, limit);
  in.read_vector(images.pixels, uint64_t(images.count) * image_bytes);
  return images;
}

std::vector<uint8_t> read_idx_labels(const std::filesystem::path& path, int limit) {
  GzFile in(path);
  const uint32_t magic = in.read_u32();
  KILN_CHECK(magic == 0x801, "IDX file {}: magic {:#x}, expected 0x801 (uint8 labels)", in.path(), magic);
  int count = checked_count(in.read_u32(), in, "labels");
  in.check_claim(uint64_t(count), 8, fmt::format("count ({} labels)", count));
  if (limit >= 0) count = std::min(count, limit);
  std::vector<uint8_t> labels;
  in.read_vector(labels, uint64_t(count));
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
