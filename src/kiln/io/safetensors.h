// io/safetensors.h — the safetensors file format (Hugging Face): an 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
// {str: str}} padded with spaces, then the tensors' raw little-endian bytes.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::io {

// Writes `tensors` (in order of decreasing element size, then as given, so every tensor is
// aligned to its element size) via a temp file and rename. Throws kiln::Error naming the path.
void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsEntry {
  DType dtype;
  Shape shape;
  int64_t begin = 0, end = 0;  // byte offsets into the data section
};

// A read-only safetensors file, memory-mapped privately and validated on open.
class SafetensorsFile {
 public:
  // Throws kiln::Error naming the file (and tensor) if the file is truncated or malformed:
  // header beyond the file, bad JSON, unknown dtype, offsets out of range or overlapping,
  // byte size that does not match dtype x shape, a dimension of 2^63 or more, or non-zero
  // dimensions whose product overflows 64 bits. Reads F64, F32, BF16, F16, I64, I32, U16, U8
  // (every dtype save_safetensors writes).
  static SafetensorsFile open(const std::filesystem::path& path);

  std::vector<std::string> names() const;  // in file (offset) order
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  // A tensor backed by the mapping (copy-on-write, keeps the mapping alive); a copy when the
  // data is not aligned to its element size. Throws if `name` is absent.
  Tensor get(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::shared_ptr<std::byte[]> mapping_;  // the whole file
  const std::byte* data_ = nullptr;       // start of the data section
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kiln::io
