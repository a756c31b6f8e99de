// fuzz/indexed_fuzz.cc — data::IndexedDataset::open + every sequence on arbitrary bytes. Input:
// a u32 little-endian idx length n, n bytes of `.idx`, the rest is `.bin`.
#include <algorithm>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kiln/data/indexed/indexed_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const size_t n = std::min<size_t>(size - 4, size_t(data[0]) | size_t(data[1]) << 8 |
                                                  size_t(data[2]) << 16 | size_t(data[3]) << 24);
  kiln::fuzz::write_temp("input.idx", data + 4, n);
  kiln::fuzz::write_temp("input.bin", data + 4 + n, size - 4 - n);
  try {
    const auto ds = kiln::data::IndexedDataset::open(kiln::fuzz::temp_dir() / "input");
    std::vector<int32_t> tokens;
    for (int64_t i = 0; i < ds->num_sequences(); ++i) {
      tokens.clear();
      ds->append_sequence(i, tokens);
      (void)ds->sequence_pointer(i);
    }
    for (int64_t d = 0; d <= ds->num_documents(); ++d) (void)ds->document_index(d);
  } catch (const kiln::Error&) {
  }
  return 0;
}
