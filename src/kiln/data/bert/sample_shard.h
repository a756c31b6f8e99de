// data/bert/sample_shard.h — the .kbs sample-shard format (docs/formats.md): a 64-byte header
// (magic, version, shape, token dtype, record count, CRC32 of the records) followed by
// fixed-size little-endian records, so sample i sits at 64 + i * record_size.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/data/bert/bert_sample.h"

namespace kiln::data {

inline constexpr char kShardMagic[8] = {'K', 'I', 'L', 'N', 'B', 'S', 'M', 'P'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderSize = 64;

enum class TokenDType : uint32_t { u16 = 1, i32 = 2 };

struct ShardLayout {
  int max_seq_length = 512;
  int max_predictions = 76;
  TokenDType token_dtype = TokenDType::u16;

  size_t token_bytes() const { return token_dtype == TokenDType::u16 ? 2 : 4; }
  // input_ids (S) + masked_ids (P) as tokens, positions (P) u16, segment_ids (S) u8,
  // length u16, num_predictions u16, next_sentence_label u8.
  size_t record_size() const {
    return (size_t(max_seq_length) + size_t(max_predictions)) * token_bytes() +
           size_t(max_predictions) * 2 + size_t(max_seq_length) + 5;
  }
};

// The smallest token dtype that holds every id of a vocabulary of `vocab_size`.
TokenDType token_dtype_for(int64_t vocab_size);

struct ShardHeader {
  ShardLayout layout;
  uint64_t record_count = 0;
  uint32_t vocab_size = 0;
  uint32_t records_crc32 = 0;
};

// One sample decoded from a record; padding is dropped.
struct SampleView {
  const uint8_t* record;
  const ShardLayout* layout;

  int length() const;
  int num_predictions() const;
  int next_sentence_label() const;
  int32_t input_id(int i) const;
  int32_t masked_id(int k) const;
  int32_t masked_position(int k) const;
  int segment_id(int i) const;
};

// Accumulates encoded records in memory, then writes one shard atomically.
class SampleShardBuilder {
 public:
  SampleShardBuilder(ShardLayout layout, uint32_t vocab_size);
  // Throws kiln::Error if the sample does not fit the layout.
  void add(const BertSample& sample);
  uint64_t size() const { return count_; }
  void write(const std::filesystem::path& path) const;

 private:
  static constexpr size_t kChunkRecords = 1024;  // records grow by chunks, never by copying
  uint8_t* record(uint64_t i);

  ShardLayout layout_;
  uint32_t vocab_size_;
  uint64_t count_ = 0;
  std::vector<std::string> chunks_;
};

// Writes a shard whose record count is known up front, records in any order: each goes to its
// place in a temporary file beside `path`, so memory holds one record; finish() adds the records'
// CRC and the header and renames the file into place. Unfinished, the temporary file is removed.
class SampleShardFileWriter {
 public:
  SampleShardFileWriter(std::filesystem::path path, ShardLayout layout, uint32_t vocab_size, uint64_t count);
  ~SampleShardFileWriter();
  SampleShardFileWriter(const SampleShardFileWriter&) = delete;
  SampleShardFileWriter& operator=(const SampleShardFileWriter&) = delete;

  // Throws kiln::Error if the sample does not fit the layout or index >= count.
  void put(uint64_t index, const BertSample& sample);
  void finish();

 private:
  void check(bool ok, const char* what) const;

  std::filesystem::path path_, tmp_;
  ShardLayout layout_;
  uint32_t vocab_size_;
  uint64_t count_;
  std::vector<uint8_t> record_;
  int fd_ = -1;
  bool finished_ = false;
};

// Parses and checks a header (magic, version, header CRC, sizes against `file_size`, a
// vocabulary size of 1 to 2^31); throws kiln::Error naming `path` and what is wrong. Does not
// check the records' CRC.
ShardHeader parse_shard_header(const uint8_t* data, size_t file_size, const std::string& path);

// CRC32 (zlib) of `size` bytes, chunked so sizes above 4 GiB work.
uint32_t crc32_of(const uint8_t* data, size_t size);

}  // namespace kiln::data
