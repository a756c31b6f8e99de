// data/indexed/indexed_dataset.h — Megatron-LM's MMIDIDX indexed dataset (`P.bin` + `P.idx`),
// read through memory maps. Format (docs/formats.md): `.bin` is the raw concatenation of all
// sequences' tokens; `.idx` is magic "MMIDIDX\0\0", u64 version 1, u8 dtype code, u64 sequence
// count S, u64 document-index count D1, then i32 lengths (S), i64 byte pointers (S) and i64
// document indices (D1), all little-endian and packed.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/data/bert/mapped_file.h"

namespace kiln::data {

// Megatron's dtype codes.
enum class IndexDType : uint8_t { u8 = 1, i8 = 2, i16 = 3, i32 = 4, i64 = 5, f64 = 6, f32 = 7, u16 = 8 };

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;
inline constexpr size_t kIndexHeaderSize = 34;

// Bytes per item of a dtype code; 0 for an unknown code.
size_t index_dtype_size(uint8_t code);
// Megatron's choice: u16 when the vocabulary has fewer than 65500 entries, else i32.
IndexDType index_dtype_for_vocab(int64_t vocab_size);

class IndexedDataset {
 public:
  // Maps `prefix.idx` and `prefix.bin` and validates them: magic, version, an integer dtype,
  // the .idx size, document indices (0 first, S last, non-decreasing) and every sequence lying
  // inside the .bin. Throws kiln::Error naming the offending file.
  static std::shared_ptr<const IndexedDataset> open(const std::filesystem::path& prefix);

  const std::string& prefix() const { return prefix_; }
  IndexDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_documents() const { return num_doc_indices_ - 1; }

  int32_t sequence_length(int64_t i) const;
  int64_t sequence_pointer(int64_t i) const;  // byte offset into .bin
  // Document d owns sequences [document_index(d), document_index(d + 1)).
  int64_t document_index(int64_t d) const;

  // Appends the tokens of sequence i to `out` as int32.
  void append_sequence(int64_t i, std::vector<int32_t>& out) const;
  std::vector<int32_t> sequence(int64_t i) const;

 private:
  IndexedDataset(const std::filesystem::path& prefix);

  std::string prefix_;
  std::unique_ptr<MappedFile> idx_, bin_;
  IndexDType dtype_ = IndexDType::u16;
  size_t item_size_ = 2;
  int64_t num_sequences_ = 0, num_doc_indices_ = 0;
  const uint8_t* lengths_ = nullptr;   // i32 (S), unaligned
  const uint8_t* pointers_ = nullptr;  // i64 (S), unaligned
  const uint8_t* documents_ = nullptr; // i64 (D1), unaligned
};

}  // namespace kiln::data
