#include "kiln/data/bert/sample_shard.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"

namespace kiln::data {

static_assert(std::endian::native == std::endian::little, "the .kbs format is little-endian");

namespace {

template <typename T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Field offsets inside a record.
struct Offsets {
  size_t masked_ids, positions, segments, length, num_pred, nsp;
  explicit Offsets(const ShardLayout& l) {
    const size_t t = l.token_bytes(), s = size_t(l.max_seq_length), p = size_t(l.max_predictions);
    masked_ids = s * t;
    positions = masked_ids + p * t;
    segments = positions + p * 2;
    length = segments + s;
    num_pred = length + 2;
    nsp = num_pred + 2;
  }
};

int32_t get_token(const uint8_t* p, const ShardLayout& l) {
  return l.token_dtype == TokenDType::u16 ? int32_t(get<uint16_t>(p)) : get<int32_t>(p);
}

void put_token(uint8_t* p, const ShardLayout& l, int32_t v) {
  if (l.token_dtype == TokenDType::u16) {
    put<uint16_t>(p, uint16_t(v));
  } else {
    put<int32_t>(p, v);
  }
}

}  // namespace

TokenDType token_dtype_for(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDType::u16 : TokenDType::i32;
}

uint32_t crc32_of(const uint8_t* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {
    const size_t n = std::min<size_t>(size, 1u << 30);
    crc = crc32(crc, data, uInt(n));
    data += n;
    size -= n;
  }
  return uint32_t(crc);
}

int SampleView::length() const { return get<uint16_t>(record + Offsets(*layout).length); }
int SampleView::num_predictions() const { return get<uint16_t>(record + Offsets(*layout).num_pred); }
int SampleView::next_sentence_label() const { return record[Offsets(*layout).nsp]; }
int32_t SampleView::input_id(int i) const {
  return get_token(record + size_t(i) * layout->token_bytes(), *layout);
}
int32_t SampleView::masked_id(int k) const {
  return get_token(record + Offsets(*layout).masked_ids + size_t(k) * layout->token_bytes(), *layout);
}
int32_t SampleView::masked_position(int k) const {
  return get<uint16_t>(record + Offsets(*layout).positions + size_t(k) * 2);
}
int SampleView::segment_id(int i) const { return record[Offsets(*layout).segments + size_t(i)]; }

namespace {

// Fills the zeroed record `r`.
void encode_record(const BertSample& s, const ShardLayout& l, uint8_t* r) {
  const size_t len = s.input_ids.size(), npred = s.masked_positions.size();
  KILN_CHECK(len <= size_t(l.max_seq_length) && s.segment_ids.size() == len,
             "sample of length {} does not fit max_seq_length {}", len, l.max_seq_length);
  KILN_CHECK(npred <= size_t(l.max_predictions) && s.masked_ids.size() == npred,
             "sample with {} predictions does not fit max_predictions {}", npred, l.max_predictions);
  const Offsets o(l);
  for (size_t i = 0; i < len; ++i) {
    put_token(r + i * l.token_bytes(), l, s.input_ids[i]);
    r[o.segments + i] = s.segment_ids[i];
  }
  for (size_t k = 0; k < npred; ++k) {
    put_token(r + o.masked_ids + k * l.token_bytes(), l, s.masked_ids[k]);
    put<uint16_t>(r + o.positions + k * 2, uint16_t(s.masked_positions[k]));
  }
  put<uint16_t>(r + o.length, uint16_t(len));
  put<uint16_t>(r + o.num_pred, uint16_t(npred));
  r[o.nsp] = uint8_t(s.next_sentence_label);
}

void encode_header(const ShardLayout& l, uint64_t count, uint32_t vocab_size, uint32_t records_crc,
                   uint8_t* h) {
  std::memset(h, 0, kShardHeaderSize);
  std::memcpy(h, kShardMagic, 8);
  put<uint32_t>(h + 8, kShardVersion);
  put<uint32_t>(h + 12, uint32_t(kShardHeaderSize));
  put<uint32_t>(h + 16, uint32_t(l.max_seq_length));
  put<uint32_t>(h + 20, uint32_t(l.max_predictions));
  put<uint32_t>(h + 24, uint32_t(l.token_dtype));
  put<uint32_t>(h + 28, uint32_t(l.record_size()));
  put<uint64_t>(h + 32, count);
  put<uint32_t>(h + 40, vocab_size);
  put<uint32_t>(h + 44, records_crc);
  put<uint32_t>(h + 60, crc32_of(h, 60));
}

}  // namespace

SampleShardBuilder::SampleShardBuilder(ShardLayout layout, uint32_t vocab_size)
    : layout_(layout), vocab_size_(vocab_size) {}

void SampleShardBuilder::add(const BertSample& s) {
  if (count_ % kChunkRecords == 0) chunks_.emplace_back().reserve(kChunkRecords * layout_.record_size());
  chunks_.back().resize(chunks_.back().size() + layout_.record_size(), '\0');
  encode_record(s, layout_, record(count_));
  ++count_;
}

uint8_t* SampleShardBuilder::record(uint64_t i) {
  return reinterpret_cast<uint8_t*>(chunks_[i / kChunkRecords].data()) + (i % kChunkRecords) * layout_.record_size();
}

void SampleShardBuilder::write(const std::filesystem::path& path) const {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const std::string& chunk : chunks_) crc = crc32(crc, reinterpret_cast<const uint8_t*>(chunk.data()), uInt(chunk.size()));
  uint8_t h[kShardHeaderSize];
  encode_header(layout_, count_, vocab_size_, uint32_t(crc), h);
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(h), kShardHeaderSize);
    for (const std::string& chunk : chunks_) out.write(chunk.data(), std::streamsize(chunk.size()));
  });
}

SampleShardFileWriter::SampleShardFileWriter(std::filesystem::path path, ShardLayout layout, uint32_t vocab_size,
                                             uint64_t count)
    : path_(std::move(path)), tmp_(path_.string() + ".tmp." + std::to_string(::getpid())), layout_(layout),
      vocab_size_(vocab_size), count_(count), record_(layout.record_size(), 0) {
  fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("{}: cannot write: {}", path_.string(), std::strerror(errno));
  check(::ftruncate(fd_, off_t(kShardHeaderSize + count * layout.record_size())) == 0, "cannot size");
}

SampleShardFileWriter::~SampleShardFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(tmp_.c_str());
}

void SampleShardFileWriter::check(bool ok, const char* what) const {
  if (!ok) throw Error("{}: {} (disk full?): {}", path_.string(), what, std::strerror(errno));
}

void SampleShardFileWriter::put(uint64_t index, const BertSample& sample) {
  KILN_CHECK(index < count_, "{}: record {} of {}", path_.string(), index, count_);
  std::fill(record_.begin(), record_.end(), 0);
  encode_record(sample, layout_, record_.data());
  const off_t at = off_t(kShardHeaderSize + index * record_.size());
  check(::pwrite(fd_, record_.data(), record_.size(), at) == ssize_t(record_.size()), "write failed");
}

void SampleShardFileWriter::finish() {
  // The records' CRC, read back in blocks (from the page cache), then the header.
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<uint8_t> block(1 << 20);
  const uint64_t total = count_ * record_.size();
  for (uint64_t done = 0; done < total;) {
    const size_t n = size_t(std::min<uint64_t>(block.size(), total - done));
    check(::pread(fd_, block.data(), n, off_t(kShardHeaderSize + done)) == ssize_t(n), "read back failed");
    crc = crc32(crc, block.data(), uInt(n));
    done += n;
  }
  uint8_t h[kShardHeaderSize];
  encode_header(layout_, count_, vocab_size_, uint32_t(crc), h);
  check(::pwrite(fd_, h, kShardHeaderSize, 0) == ssize_t(kShardHeaderSize), "write failed");
  check(::fsync(fd_) == 0, "sync failed");
  check(::close(fd_) == 0, "close failed");
  fd_ = -1;
  check(::rename(tmp_.c_str(), path_.c_str()) == 0, "cannot rename from temp file");
  finished_ = true;
  fsync_path(path_.has_parent_path() ? path_.parent_path() : std::filesystem::path("."));
}

ShardHeader parse_shard_header(const uint8_t* h, size_t file_size, const std::string& path) {
  KILN_CHECK(file_size >= kShardHeaderSize,
             "sample shard {}: truncated ({} bytes, the header alone needs {})", path, file_size,
             kShardHeaderSize);
  KILN_CHECK(std::memcmp(h, kShardMagic, 8) == 0, "sample shard {}: bad magic (not a .kbs file)", path);
  const uint32_t version = get<uint32_t>(h + 8);
  KILN_CHECK(version == kShardVersion, "sample shard {}: unsupported format version {} (expected {})",
             path, version, kShardVersion);
  KILN_CHECK(get<uint32_t>(h + 60) == crc32_of(h, 60), "sample shard {}: header checksum mismatch", path);
  KILN_CHECK(get<uint32_t>(h + 12) == kShardHeaderSize, "sample shard {}: bad header size {}", path,
             get<uint32_t>(h + 12));
  ShardHeader header;
  header.layout.max_seq_length = int(get<uint32_t>(h + 16));
  header.layout.max_predictions = int(get<uint32_t>(h + 20));
  const uint32_t dtype = get<uint32_t>(h + 24);
  KILN_CHECK(dtype == uint32_t(TokenDType::u16) || dtype == uint32_t(TokenDType::i32),
             "sample shard {}: unknown token dtype {}", path, dtype);
  header.layout.token_dtype = TokenDType(dtype);
  KILN_CHECK(header.layout.max_seq_length >= 1 && header.layout.max_seq_length <= 65535 &&
                 header.layout.max_predictions >= 0 &&
                 header.layout.max_predictions <= header.layout.max_seq_length &&
                 get<uint32_t>(h + 28) == header.layout.record_size(),
             "sample shard {}: inconsistent shape in header", path);
  header.record_count = get<uint64_t>(h + 32);
  header.vocab_size = get<uint32_t>(h + 40);
  // The loaders check every id against it; 0 would leave them unchecked. Ids are int32.
  KILN_CHECK(header.vocab_size >= 1 && header.vocab_size <= uint32_t(INT32_MAX) + 1,
             "sample shard {}: header field vocab_size is {}, expected 1 to 2147483648", path, header.vocab_size);
  header.records_crc32 = get<uint32_t>(h + 44);
  // Checked by division first: a huge count would wrap the product around to the file size.
  KILN_CHECK(header.record_count <= (file_size - kShardHeaderSize) / header.layout.record_size(),
             "sample shard {}: truncated ({} bytes, too short for {} records)", path, file_size,
             header.record_count);
  const uint64_t expected = kShardHeaderSize + header.record_count * header.layout.record_size();
  KILN_CHECK(file_size >= expected, "sample shard {}: truncated ({} bytes, expected {} for {} records)",
             path, file_size, expected, header.record_count);
  KILN_CHECK(file_size == expected, "sample shard {}: {} trailing bytes after {} records", path,
             file_size - expected, header.record_count);
  return header;
}

}  // namespace kiln::data
