// data/bert/mapped_file.h — a read-only memory map of a whole file (empty files map to nothing).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace kiln::data {

class MappedFile {
 public:
  // Throws kiln::Error naming `path` if it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view text() const { return {reinterpret_cast<const char*>(data_), size_}; }
  // Drops the whole pages within bytes [begin, end) from memory; they are read again if touched.
  // Keeps the resident set of a pass over a large file small.
  void release(size_t begin, size_t end) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln::data
