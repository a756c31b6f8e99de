#include "kiln/data/bert/sample_shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "data_test_util.h"
#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/data/bert/sample_set.h"

namespace kiln::data {
namespace {

// Sample i: length 5 + i % 7, ids 1000 + 10 i + position, i % 3 predictions.
BertSample make_sample(int i, int32_t id_base = 1000) {
  BertSample s;
  const int len = 5 + i % 7;
  for (int p = 0; p < len; ++p) {
    s.input_ids.push_back(id_base + 10 * i + p);
    s.segment_ids.push_back(p >= 3 ? 1 : 0);
  }
  for (int k = 0; k < i % 3; ++k) {
    s.masked_positions.push_back(1 + k);
    s.masked_ids.push_back(id_base + 5 * k + i);
  }
  s.next_sentence_label = i % 2;
  return s;
}

void write_shard(const std::filesystem::path& path, int count, TokenDType dtype = TokenDType::u16,
                 int32_t id_base = 1000) {
  SampleShardBuilder b(ShardLayout{16, 4, dtype}, dtype == TokenDType::u16 ? 30522 : 100000);
  for (int i = 0; i < count; ++i) b.add(make_sample(i, id_base));
  b.write(path);
}

void expect_open_error(const std::filesystem::path& path, const std::string& what) {
  try {
    BertSampleSet::open(path);
    FAIL() << "no error opening " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

void patch(const std::filesystem::path& path, size_t offset, uint8_t value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(offset));
  f.put(char(value));
}

// The file writer puts records in any order; put in order i -> place[i] they give the file the
// builder writes for the samples in their final order. Unfinished, it leaves no file behind.
TEST(SampleShard, FileWriterPlacesRecordsInAnyOrder) {
  const auto dir = testing::fresh_temp_dir("shard-file-writer");
  const int n = 2500;  // more than one of the builder's chunks
  const ShardLayout layout{16, 4, TokenDType::u16};
  std::vector<uint32_t> place(n);
  for (int i = 0; i < n; ++i) place[size_t(i)] = uint32_t((uint64_t(i) * 1543 + 7) % n);  // 1543 is prime to 2500
  std::vector<int> at(n);
  for (int i = 0; i < n; ++i) at[place[size_t(i)]] = i;
  SampleShardBuilder builder(layout, 30522);
  for (int k = 0; k < n; ++k) builder.add(make_sample(at[size_t(k)], 0));
  builder.write(dir / "built.kbs");
  SampleShardFileWriter writer(dir / "placed.kbs", layout, 30522, n);
  for (int i = 0; i < n; ++i) writer.put(place[size_t(i)], make_sample(i, 0));
  writer.finish();
  EXPECT_EQ(read_file(dir / "placed.kbs"), read_file(dir / "built.kbs"));
  EXPECT_EQ(BertSampleSet::open(dir / "placed.kbs").size(), n);
  {
    SampleShardFileWriter unfinished(dir / "unfinished.kbs", layout, 30522, 3);
    unfinished.put(0, make_sample(0, 0));
    EXPECT_THROW(unfinished.put(3, make_sample(1, 0)), Error);
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 2);
  std::filesystem::remove_all(dir);
}

TEST(SampleShard, RoundTripsSamplesWithPadding) {
  const auto dir = testing::fresh_temp_dir("shard-roundtrip");
  for (const auto dtype : {TokenDType::u16, TokenDType::i32}) {
    const int32_t base = dtype == TokenDType::u16 ? 1000 : 70000;
    write_shard(dir / "a.kbs", 9, dtype, base);
    const BertSampleSet set = BertSampleSet::open(dir / "a.kbs");
    ASSERT_EQ(set.size(), 9);
    ASSERT_EQ(set.seq_len(), 16);
    ASSERT_EQ(set.max_pred(), 4);
    BertBatch batch;
    batch.resize(2, 16, 4);
    for (int i = 0; i < 9; ++i) {
      const BertSample s = make_sample(i, base);
      set.read(i, batch, 1);
      for (int p = 0; p < 16; ++p) {
        const bool real = p < int(s.input_ids.size());
        EXPECT_EQ(batch.input_ids[16 + size_t(p)], real ? s.input_ids[size_t(p)] : 0);
        EXPECT_EQ(batch.segment_ids[16 + size_t(p)], real ? s.segment_ids[size_t(p)] : 0);
        EXPECT_EQ(batch.input_mask[16 + size_t(p)], real ? 1 : 0);
      }
      for (int k = 0; k < 4; ++k) {
        const bool real = k < int(s.masked_ids.size());
        EXPECT_EQ(batch.masked_positions[4 + size_t(k)], real ? s.masked_positions[size_t(k)] : 0);
        EXPECT_EQ(batch.masked_ids[4 + size_t(k)], real ? s.masked_ids[size_t(k)] : 0);
        EXPECT_EQ(batch.masked_weights[4 + size_t(k)], real ? 1.0f : 0.0f);
      }
      EXPECT_EQ(batch.nsp_labels[1], s.next_sentence_label);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(SampleShard, DirectoryConcatenatesShardsInSortedOrder) {
  const auto dir = testing::fresh_temp_dir("shard-dir");
  write_shard(dir / "part-00001.kbs", 3, TokenDType::u16, 2000);
  write_shard(dir / "part-00000.kbs", 4, TokenDType::u16, 1000);
  testing::write_text(dir / "notes.txt", "ignored");
  const BertSampleSet set = BertSampleSet::open(dir);
  ASSERT_EQ(set.size(), 7);
  EXPECT_EQ(set.view(0).input_id(0), 1000);
  EXPECT_EQ(set.view(4).input_id(0), 2000);
  EXPECT_EQ(set.view(6).input_id(0), 2020);
  EXPECT_THROW(set.view(7), Error);
  std::filesystem::remove_all(dir);
}

TEST(SampleShard, CorruptFilesAreRejectedWithTheirName) {
  const auto dir = testing::fresh_temp_dir("shard-corrupt");
  const auto fresh = [&](const std::string& name) {
    write_shard(dir / name, 5);
    return dir / name;
  };
  expect_open_error(dir / "missing.kbs", "not found");

  const auto truncated = fresh("truncated.kbs");
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) - 1);
  expect_open_error(truncated, "truncated");

  const auto tiny = fresh("tiny.kbs");
  std::filesystem::resize_file(tiny, 20);
  expect_open_error(tiny, "truncated");

  const auto magic = fresh("magic.kbs");
  patch(magic, 0, 'X');
  expect_open_error(magic, "bad magic");

  const auto version = fresh("version.kbs");
  patch(version, 8, 7);
  expect_open_error(version, "version 7");

  const auto header = fresh("header.kbs");
  patch(header, 16, 17);  // max_seq_length 16 -> 17
  expect_open_error(header, "header checksum");

  const auto records = fresh("records.kbs");
  patch(records, kShardHeaderSize + 3, 0x5A);
  expect_open_error(records, "checksum mismatch");

  const auto trailing = fresh("trailing.kbs");
  std::ofstream(trailing, std::ios::app | std::ios::binary) << "x";
  expect_open_error(trailing, "trailing");
  std::filesystem::remove_all(dir);
}

// A record count whose product with the record size wraps around to the file size (seq 1,
// 0 predictions: 8-byte records, 2^61 + 1 of them "fit" in 8 bytes) used to pass the size check
// and let reads run past the mapping.
TEST(SampleShard, WrappingRecordCountIsRejected) {
  const auto dir = testing::fresh_temp_dir("shard-wrap");
  uint8_t file[kShardHeaderSize + 8] = {};
  const auto put32 = [&](size_t at, uint32_t v) { std::memcpy(file + at, &v, 4); };
  std::memcpy(file, kShardMagic, 8);
  put32(8, kShardVersion);
  put32(12, uint32_t(kShardHeaderSize));
  put32(16, 1);
  put32(20, 0);
  put32(24, uint32_t(TokenDType::u16));
  put32(28, uint32_t(ShardLayout{1, 0, TokenDType::u16}.record_size()));
  const uint64_t count = (uint64_t(1) << 61) + 1;
  std::memcpy(file + 32, &count, 8);
  put32(40, 30522);
  put32(44, crc32_of(file + kShardHeaderSize, 8));
  put32(60, crc32_of(file, 60));
  const auto path = dir / "wrap.kbs";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(file), sizeof file);
  expect_open_error(path, "too short for 2305843009213693953 records");
  std::filesystem::remove_all(dir);
}

// A header with vocab_size 0 turned the loaders' id check off (ids up to 2^31 accepted): it is
// refused on open, naming the field; so is one past 2^31 (ids are int32).
TEST(SampleShard, AVocabularySizeOfZeroOrPast2To31IsRefused) {
  const auto dir = testing::fresh_temp_dir("shard-vocab");
  const auto with_vocab = [&](const std::string& name, uint32_t vocab) {
    const auto path = dir / name;
    write_shard(path, 3);
    std::string bytes = read_file(path);
    std::memcpy(bytes.data() + 40, &vocab, 4);
    const uint32_t crc = crc32_of(reinterpret_cast<const uint8_t*>(bytes.data()), 60);
    std::memcpy(bytes.data() + 60, &crc, 4);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return path;
  };
  expect_open_error(with_vocab("zero.kbs", 0), "header field vocab_size is 0, expected 1 to 2147483648");
  expect_open_error(with_vocab("huge.kbs", 0x80000001u), "header field vocab_size is 2147483649, expected 1 to 2147483648");
  EXPECT_EQ(BertSampleSet::open(with_vocab("small.kbs", 2000)).vocab_size(), 2000u);
  std::filesystem::remove_all(dir);
}

TEST(SampleShard, MixedShapesInOneDirectoryAreRejected) {
  const auto dir = testing::fresh_temp_dir("shard-mixed");
  write_shard(dir / "a.kbs", 2);
  SampleShardBuilder other(ShardLayout{32, 4, TokenDType::u16}, 30522);
  other.add(make_sample(0));
  other.write(dir / "b.kbs");
  try {
    BertSampleSet::open(dir);
    FAIL() << "mixed shapes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "b.kbs").string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("differs"), std::string::npos) << e.what();
  }
  SampleShardBuilder small(ShardLayout{8, 4, TokenDType::u16}, 30522);
  EXPECT_THROW(small.add(make_sample(6)), Error);  // length 11 > 8
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::data
