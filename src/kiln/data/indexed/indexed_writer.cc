#include "kiln/data/indexed/indexed_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"

namespace kiln::data {

namespace {

template <typename T>
void put(std::ostream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(const std::filesystem::path& prefix, IndexDType dtype)
    : prefix_(prefix.string()), bin_tmp_(prefix_ + ".bin.tmp." + std::to_string(::getpid())), dtype_(dtype) {
  KILN_CHECK(dtype == IndexDType::u16 || dtype == IndexDType::i32, "{}: writer supports u16 and i32 tokens only",
             prefix_);
  bin_.open(bin_tmp_, std::ios::binary | std::ios::trunc);
  KILN_CHECK(bin_.good(), "{}: cannot create ({})", bin_tmp_, std::strerror(errno));
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!finished_) {
    bin_.close();
    std::error_code ec;
    std::filesystem::remove(bin_tmp_, ec);
  }
}

void IndexedDatasetWriter::add_sequence(std::span<const int32_t> tokens) {
  const size_t item = index_dtype_size(uint8_t(dtype_));
  buffer_.resize(tokens.size() * item);
  for (size_t k = 0; k < tokens.size(); ++k) {
    const int32_t t = tokens[k];
    if (dtype_ == IndexDType::u16) {
      KILN_CHECK(t >= 0 && t <= 0xFFFF, "{}: token id {} does not fit uint16", prefix_, t);
      const uint16_t v = uint16_t(t);
      std::memcpy(&buffer_[2 * k], &v, 2);
    } else {
      std::memcpy(&buffer_[4 * k], &t, 4);
    }
  }
  bin_.write(reinterpret_cast<const char*>(buffer_.data()), std::streamsize(buffer_.size()));
  lengths_.push_back(int32_t(tokens.size()));
  tokens_ += int64_t(tokens.size());
}

void IndexedDatasetWriter::end_document() { documents_.push_back(int64_t(lengths_.size())); }

void IndexedDatasetWriter::finish() {
  bin_.flush();
  KILN_CHECK(bin_.good(), "{}: write failed ({})", bin_tmp_, std::strerror(errno));
  bin_.close();
  fsync_path(bin_tmp_);
  const std::string bin_path = prefix_ + ".bin";
  std::error_code ec;
  std::filesystem::rename(bin_tmp_, bin_path, ec);
  KILN_CHECK(!ec, "{}: cannot rename to {} ({})", bin_tmp_, bin_path, ec.message());
  finished_ = true;
  const size_t item = index_dtype_size(uint8_t(dtype_));
  write_file_atomic(prefix_ + ".idx", [&](std::ostream& out) {
    out.write(kIndexMagic, sizeof kIndexMagic);
    put<uint64_t>(out, kIndexVersion);
    put<uint8_t>(out, uint8_t(dtype_));
    put<uint64_t>(out, lengths_.size());
    put<uint64_t>(out, documents_.size());
    out.write(reinterpret_cast<const char*>(lengths_.data()), std::streamsize(4 * lengths_.size()));
    int64_t pointer = 0;
    for (const int32_t len : lengths_) {
      put<int64_t>(out, pointer);
      pointer += int64_t(len) * int64_t(item);
    }
    out.write(reinterpret_cast<const char*>(documents_.data()), std::streamsize(8 * documents_.size()));
  });
}

}  // namespace kiln::data
