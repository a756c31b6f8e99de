#include "kiln/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"

namespace kiln::io {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u16: return "U16";
    case DType::u8: return "U8";
    case DType::f64: return "F64";
  }
  return "?";
}

bool parse_safetensors_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F32", DType::f32}, {"BF16", DType::bf16}, {"F16", DType::f16}, {"I32", DType::i32},
      {"I64", DType::i64}, {"U16", DType::u16},   {"U8", DType::u8},  {"F64", DType::f64}};
  for (const auto& [name, t] : kNames) {
    if (s == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool is_nonneg_int(const json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
}

}  // namespace

void save_safetensors(const fs::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].second.dtype) > dtype_size(tensors[b].second.dtype);
  });

  json header = json::object();
  std::set<std::string> seen;
  int64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    if (name.empty() || name == "__metadata__")
      throw Error("{}: invalid tensor name '{}'", path.string(), name);
    if (!seen.insert(name).second)
      throw Error("{}: tensor '{}' given twice", path.string(), name);
    if (!t.defined() && t.numel() != 0)
      throw Error("{}: tensor '{}' has no data", path.string(), name);
    const int64_t bytes = int64_t(t.nbytes());
    header[name] = {{"dtype", safetensors_dtype(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;

  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  write_file_atomic(path, [&](std::ostream& out) {
    uint8_t len[8];
    for (int b = 0; b < 8; ++b) len[b] = uint8_t(uint64_t(text.size()) >> (8 * b));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (size_t i : order) {
      const Tensor& t = tensors[i].second;
      if (t.numel()) out.write(static_cast<const char*>(t.data), std::streamsize(t.nbytes()));
    }
  });
}

SafetensorsFile SafetensorsFile::open(const fs::path& path) {
  const std::string p = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("{}: cannot open: {}", p, std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("{}: cannot stat: {}", p, std::strerror(errno));
  }
  const uint64_t file_size = uint64_t(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    throw Error("{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", p,
                file_size);
  }
  // Private writable mapping: tensors handed out may be modified without touching the file.
  void* addr = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) throw Error("{}: cannot map: {}", p, std::strerror(errno));

  SafetensorsFile f;
  f.path_ = path;
  f.mapping_ = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(addr),
                                            [file_size](std::byte* a) { ::munmap(a, file_size); });
  const auto* bytes = reinterpret_cast<const uint8_t*>(addr);
  uint64_t header_len = 0;
  for (int b = 0; b < 8; ++b) header_len |= uint64_t(bytes[b]) << (8 * b);
  if (header_len > file_size - 8)
    throw Error("{}: header length {} runs past the end of the file ({} bytes); truncated or not "
                "a safetensors file", p, header_len, file_size);
  const uint64_t data_size = file_size - 8 - header_len;
  f.data_ = f.mapping_.get() + 8 + header_len;

  const json header =
      json::parse(reinterpret_cast<const char*>(bytes) + 8,
                  reinterpret_cast<const char*>(bytes) + 8 + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    throw Error("{}: header is not a JSON object", p);

  std::vector<std::pair<int64_t, std::string>> by_offset;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) throw Error("{}: __metadata__ is not an object", p);
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string()) throw Error("{}: __metadata__ value of '{}' is not a string", p, k);
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets"))
      throw Error("{}: tensor '{}': entry needs dtype, shape and data_offsets", p, name);
    SafetensorsEntry entry;
    if (!e["dtype"].is_string() || !parse_safetensors_dtype(e["dtype"].get<std::string>(),
                                                            &entry.dtype))
      throw Error("{}: tensor '{}': unsupported dtype {} (kiln reads F64, F32, BF16, F16, I64, "
                  "I32, U16, U8)", p, name, e["dtype"].dump());
    const json& shape = e["shape"];
    if (!shape.is_array()) throw Error("{}: tensor '{}': shape is not an array", p, name);
    // kiln holds dimensions and element counts as int64: the product of the non-zero
    // dimensions must fit it, so that every partial product does, whatever a zero after it.
    int64_t nonzero_product = 1;
    bool empty = false;
    for (const json& d : shape) {
      if (!is_nonneg_int(d))
        throw Error("{}: tensor '{}': shape {} has a negative or non-integer dimension", p, name,
                    shape.dump());
      const uint64_t dim = d.get<uint64_t>();
      if (dim > uint64_t(INT64_MAX))
        throw Error("{}: tensor '{}': shape {} has a dimension of 2^63 or more", p, name,
                    shape.dump());
      if (dim == 0) empty = true;
      else if (__builtin_mul_overflow(nonzero_product, int64_t(dim), &nonzero_product))
        throw Error("{}: tensor '{}': shape {} overflows 64 bits", p, name, shape.dump());
      entry.shape.push_back(int64_t(dim));
    }
    const uint64_t numel = empty ? 0 : uint64_t(nonzero_product);
    const json& offs = e["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !is_nonneg_int(offs[0]) ||
        !is_nonneg_int(offs[1]))
      throw Error("{}: tensor '{}': data_offsets must be [begin, end]", p, name);
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end || end > data_size)
      throw Error("{}: tensor '{}': data_offsets [{}, {}] outside the data section of {} bytes", p,
                  name, begin, end, data_size);
    uint64_t expected = 0;
    if (__builtin_mul_overflow(numel, uint64_t(dtype_size(entry.dtype)), &expected) ||
        expected != end - begin)
      throw Error("{}: tensor '{}': {} bytes for dtype {} and shape {}, expected {}", p, name,
                  end - begin, e["dtype"].get<std::string>(), shape.dump(), expected);
    entry.begin = int64_t(begin);
    entry.end = int64_t(end);
    by_offset.emplace_back(entry.begin, name);
    f.entries_.emplace(name, std::move(entry));
  }
  std::sort(by_offset.begin(), by_offset.end());
  const std::string* prev = nullptr;  // the last non-empty tensor in offset order
  for (const auto& [begin, name] : by_offset) {
    const auto& e = f.entries_.at(name);
    if (e.begin == e.end) continue;
    if (prev && begin < f.entries_.at(*prev).end)
      throw Error("{}: tensors '{}' and '{}' overlap", p, *prev, name);
    prev = &name;
  }
  return f;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::pair<int64_t, std::string>> by_offset;
  for (const auto& [name, e] : entries_) by_offset.emplace_back(e.begin, name);
  std::sort(by_offset.begin(), by_offset.end());
  std::vector<std::string> out;
  for (auto& [offset, name] : by_offset) out.push_back(std::move(name));
  return out;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error("{}: no tensor named '{}'", path_.string(), name);
  return it->second;
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  std::byte* src = const_cast<std::byte*>(data_) + e.begin;
  if (reinterpret_cast<uintptr_t>(src) % dtype_size(e.dtype) != 0) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    std::memcpy(t.data, src, t.nbytes());
    return t;
  }
  Tensor t = Tensor::view(src, e.shape, e.dtype);
  t.storage = std::shared_ptr<std::byte[]>(mapping_, src);  // aliasing: keeps the mapping alive
  return t;
}

}  // namespace kiln::io
