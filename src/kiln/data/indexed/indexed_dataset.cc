#include "kiln/data/indexed/indexed_dataset.h"

#include <cstring>

#include "kiln/core/error.h"

namespace kiln::data {

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

size_t index_dtype_size(uint8_t code) {
  switch (code) {
    case 1: case 2: return 1;
    case 3: case 8: return 2;
    case 4: case 7: return 4;
    case 5: case 6: return 8;
    default: return 0;
  }
}

IndexDType index_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? IndexDType::u16 : IndexDType::i32;
}

std::shared_ptr<const IndexedDataset> IndexedDataset::open(const std::filesystem::path& prefix) {
  return std::shared_ptr<const IndexedDataset>(new IndexedDataset(prefix));
}

IndexedDataset::IndexedDataset(const std::filesystem::path& prefix) : prefix_(prefix.string()) {
  const std::string idx_path = prefix_ + ".idx", bin_path = prefix_ + ".bin";
  KILN_CHECK(std::filesystem::exists(idx_path), "{}: not found (--data-path takes the prefix without .idx/.bin)",
             idx_path);
  KILN_CHECK(std::filesystem::exists(bin_path), "{}: not found", bin_path);
  idx_ = std::make_unique<MappedFile>(idx_path);
  const uint8_t* p = idx_->data();
  const size_t n = idx_->size();
  KILN_CHECK(n >= sizeof kIndexMagic && std::memcmp(p, kIndexMagic, sizeof kIndexMagic) == 0,
             "{}: not a Megatron indexed dataset (bad magic)", idx_path);
  KILN_CHECK(n >= kIndexHeaderSize, "{}: truncated header ({} bytes)", idx_path, n);
  const uint64_t version = load<uint64_t>(p + 9);
  KILN_CHECK(version == kIndexVersion, "{}: unsupported version {} (expected 1)", idx_path, version);
  const uint8_t code = p[17];
  KILN_CHECK(index_dtype_size(code) != 0, "{}: unknown dtype code {}", idx_path, code);
  KILN_CHECK(code != 6 && code != 7, "{}: dtype code {} is floating point, not token ids", idx_path, code);
  dtype_ = IndexDType(code);
  item_size_ = index_dtype_size(code);
  const uint64_t s = load<uint64_t>(p + 18), d1 = load<uint64_t>(p + 26);
  KILN_CHECK(s < (uint64_t(1) << 40) && d1 >= 1 && d1 < (uint64_t(1) << 40),
             "{}: implausible counts (sequences {}, document indices {})", idx_path, s, d1);
  const uint64_t need = kIndexHeaderSize + 12 * s + 8 * d1;
  KILN_CHECK(n >= need, "{}: truncated ({} bytes, the header needs {})", idx_path, n, need);
  num_sequences_ = int64_t(s);
  num_doc_indices_ = int64_t(d1);
  lengths_ = p + kIndexHeaderSize;
  pointers_ = lengths_ + 4 * s;
  documents_ = pointers_ + 8 * s;

  KILN_CHECK(document_index(0) == 0, "{}: first document index is {}, not 0", idx_path, document_index(0));
  KILN_CHECK(document_index(num_doc_indices_ - 1) == num_sequences_,
             "{}: last document index {} != sequence count {}", idx_path,
             document_index(num_doc_indices_ - 1), num_sequences_);
  for (int64_t d = 1; d < num_doc_indices_; ++d)
    KILN_CHECK(document_index(d) >= document_index(d - 1), "{}: document indices decrease at {}", idx_path, d);

  bin_ = std::make_unique<MappedFile>(bin_path);
  const int64_t bin_size = int64_t(bin_->size());
  for (int64_t i = 0; i < num_sequences_; ++i) {
    const int64_t len = sequence_length(i), ptr = sequence_pointer(i);
    KILN_CHECK(len >= 0 && ptr >= 0, "{}: sequence {} has length {} at byte {}", idx_path, i, len, ptr);
    const uint64_t end = uint64_t(ptr) + uint64_t(len) * item_size_;  // no wrap: ptr < 2^63, len < 2^31
    KILN_CHECK(end <= uint64_t(bin_size), "{}: truncated: sequence {} ends at byte {} but the file has {} bytes", bin_path,
               i, end, bin_size);
  }
}

int32_t IndexedDataset::sequence_length(int64_t i) const { return load<int32_t>(lengths_ + 4 * size_t(i)); }
int64_t IndexedDataset::sequence_pointer(int64_t i) const { return load<int64_t>(pointers_ + 8 * size_t(i)); }
int64_t IndexedDataset::document_index(int64_t d) const { return load<int64_t>(documents_ + 8 * size_t(d)); }

void IndexedDataset::append_sequence(int64_t i, std::vector<int32_t>& out) const {
  const size_t len = size_t(sequence_length(i));
  const uint8_t* src = bin_->data() + sequence_pointer(i);
  const size_t base = out.size();
  out.resize(base + len);
  int32_t* dst = out.data() + base;
  switch (dtype_) {
    case IndexDType::u8: for (size_t k = 0; k < len; ++k) dst[k] = src[k]; break;
    case IndexDType::i8: for (size_t k = 0; k < len; ++k) dst[k] = int8_t(src[k]); break;
    case IndexDType::i16: for (size_t k = 0; k < len; ++k) dst[k] = load<int16_t>(src + 2 * k); break;
    case IndexDType::u16: for (size_t k = 0; k < len; ++k) dst[k] = load<uint16_t>(src + 2 * k); break;
    case IndexDType::i32: std::memcpy(dst, src, 4 * len); break;
    case IndexDType::i64: for (size_t k = 0; k < len; ++k) dst[k] = int32_t(load<int64_t>(src + 8 * k)); break;
    default: throw Error("{}.idx: dtype {} is not a token type", prefix_, int(dtype_));
  }
}

std::vector<int32_t> IndexedDataset::sequence(int64_t i) const {
  std::vector<int32_t> out;
  append_sequence(i, out);
  return out;
}

}  // namespace kiln::data
