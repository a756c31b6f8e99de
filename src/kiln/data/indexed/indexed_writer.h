// data/indexed/indexed_writer.h — writes a Megatron MMIDIDX dataset (`P.bin` + `P.idx`).
// Tokens stream to `P.bin.tmp.<pid>`; finish() renames it to `P.bin`, then writes `P.idx`
// through a temp name as well, so an interrupted run never leaves a valid-looking pair.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "kiln/data/indexed/indexed_dataset.h"

namespace kiln::data {

class IndexedDatasetWriter {
 public:
  // Throws kiln::Error naming the file if the temp .bin cannot be created.
  IndexedDatasetWriter(const std::filesystem::path& prefix, IndexDType dtype);
  ~IndexedDatasetWriter();  // removes the temp .bin unless finish() completed
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Appends one sequence (sentence); ids must fit the dtype.
  void add_sequence(std::span<const int32_t> tokens);
  // Closes the current document (it may be empty, as Megatron allows).
  void end_document();
  void finish();

  int64_t num_sequences() const { return int64_t(lengths_.size()); }
  int64_t num_documents() const { return int64_t(documents_.size()) - 1; }
  int64_t num_tokens() const { return tokens_; }

 private:
  std::string prefix_, bin_tmp_;
  IndexDType dtype_;
  std::ofstream bin_;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> documents_{0};
  std::vector<uint8_t> buffer_;
  int64_t tokens_ = 0;
  bool finished_ = false;
};

}  // namespace kiln::data
