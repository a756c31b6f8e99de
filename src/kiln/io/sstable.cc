#include "kiln/io/sstable.h"

#include <cstdint>
#include <cstring>
#include <set>
#include <string_view>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/log/crc32c.h"

namespace kiln::io {
namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kFooterSize = 48, kTrailerSize = 5;
// Keys share prefixes with the key before them, so a block of short entries can spell out far
// more bytes than it holds (n entries each adding a byte to the last key: n^2 / 2). A TensorFlow
// index expands by a few times; the keys and values read may not exceed this many times the
// file's size.
constexpr size_t kMaxExpansion = 64;

struct BlockHandle {
  uint64_t offset = 0, size = 0;
};

class TableReader {
 public:
  TableReader(const std::filesystem::path& path) : path_(path.string()), file_(read_file(path)) {}

  std::vector<std::pair<std::string, std::string>> entries() {
    if (file_.size() < kFooterSize) fail("shorter than the 48-byte table footer");
    std::string_view footer = std::string_view(file_).substr(file_.size() - kFooterSize);
    uint64_t magic;
    std::memcpy(&magic, footer.data() + 40, 8);
    if (magic != kTableMagic) fail("bad table magic (not a LevelDB/TensorFlow table)");
    std::string_view handles = footer.substr(0, 40);
    read_handle(handles, "metaindex handle");
    const BlockHandle index = read_handle(handles, "index handle");

    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [separator, value] : block_entries(index, "index block")) {
      std::string_view v = value;
      const BlockHandle data = read_handle(v, "data block handle");
      for (auto& kv : block_entries(data, "data block at offset " + std::to_string(data.offset))) {
        if (!out.empty() && kv.first <= out.back().first) fail("keys out of order at '" + kv.first + "'");
        if (kv.first > separator) fail("key '" + kv.first + "' beyond its index entry '" + separator + "'");
        out.push_back(std::move(kv));
      }
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw Error("{}: {}", path_, problem); }

  uint64_t read_varint(std::string_view& in, const std::string& what, int max_bits) const {
    uint64_t value = 0;
    for (int shift = 0; shift < max_bits; shift += 7) {
      if (in.empty()) fail("truncated varint in " + what);
      const auto byte = uint8_t(in.front());
      in.remove_prefix(1);
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    fail("overlong varint in " + what);
  }

  BlockHandle read_handle(std::string_view& in, const std::string& what) const {
    BlockHandle h;
    h.offset = read_varint(in, what, 64);
    h.size = read_varint(in, what, 64);
    return h;
  }

  // The block's contents after checking its trailer.
  std::string_view block(const BlockHandle& h, const std::string& what) const {
    if (h.offset > file_.size() || h.size > file_.size() - h.offset ||
        kTrailerSize > file_.size() - h.offset - h.size)
      fail(what + " lies outside the file");
    const char* p = file_.data() + h.offset;
    const auto type = uint8_t(p[h.size]);
    if (type != 0) fail(what + " is compressed (type " + std::to_string(type) + "); only uncompressed tables are read");
    uint32_t stored;
    std::memcpy(&stored, p + h.size + 1, 4);
    if (log::masked_crc32c(log::crc32c(p, h.size + 1)) != stored) fail(what + ": checksum mismatch");
    return {p, h.size};
  }

  std::vector<std::pair<std::string, std::string>> block_entries(const BlockHandle& h, const std::string& what) {
    const std::string_view data = block(h, what);
    if (data.size() < 4) fail(what + ": too short for its restart count");
    uint32_t restarts;
    std::memcpy(&restarts, data.data() + data.size() - 4, 4);
    if (restarts == 0 || restarts > (data.size() - 4) / 4) fail(what + ": bad restart count");
    const size_t limit = data.size() - 4 - 4 * size_t(restarts);
    std::set<uint32_t> restart_offsets;
    for (uint32_t r = 0; r < restarts; ++r) {
      uint32_t offset;
      std::memcpy(&offset, data.data() + limit + 4 * r, 4);
      restart_offsets.insert(offset);
    }
    std::vector<std::pair<std::string, std::string>> out;
    std::string key;
    std::string_view in = data.substr(0, limit);
    while (!in.empty()) {
      const auto at = uint32_t(limit - in.size());
      const uint64_t shared = read_varint(in, what, 35), unshared = read_varint(in, what, 35),
                     value_size = read_varint(in, what, 35);
      if (shared > key.size() || unshared > in.size() || value_size > in.size() - unshared)
        fail(what + ": malformed entry at offset " + std::to_string(at));
      // A restart point stores its whole key: that is what lets a reader seek to it.
      if (restart_offsets.erase(at) && shared != 0)
        fail(what + ": restart point at offset " + std::to_string(at) + " shares a key prefix");
      key.resize(shared);
      key.append(in.substr(0, unshared));
      decoded_ += key.size() + value_size;
      if (decoded_ > kMaxExpansion * file_.size())
        fail(what + ": the keys and values expand to more than " + std::to_string(kMaxExpansion) +
             " times the file's size at offset " + std::to_string(at));
      out.emplace_back(key, std::string(in.substr(unshared, value_size)));
      in.remove_prefix(unshared + value_size);
    }
    if (!out.empty() && !restart_offsets.empty())  // an empty block has the one restart 0
      fail(what + ": restart offset " + std::to_string(*restart_offsets.begin()) + " is not an entry");
    return out;
  }

  std::string path_;
  std::string file_;
  size_t decoded_ = 0;  // bytes of keys and values read so far
};

}  // namespace

std::vector<std::pair<std::string, std::string>> read_sstable(const std::filesystem::path& path) {
  return TableReader(path).entries();
}

}  // namespace kiln::io
