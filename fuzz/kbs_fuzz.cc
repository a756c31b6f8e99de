// fuzz/kbs_fuzz.cc — data::BertSampleSet::open + read of every sample on arbitrary bytes. Each
// input is tried as given and with both CRCs recomputed, so mutations reach past the checksums.
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kiln/data/bert/sample_set.h"

namespace {

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

void try_shard(const uint8_t* data, size_t size) {
  const auto path = kiln::fuzz::write_temp("input.kbs", data, size);
  try {
    const auto set = kiln::data::BertSampleSet::open(path);
    kiln::data::BertBatch batch;
    batch.resize(1, set.seq_len(), set.max_pred());
    for (int64_t i = 0; i < set.size(); ++i) set.read(i, batch, 0);
  } catch (const kiln::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try_shard(data, size);
  if (size >= kiln::data::kShardHeaderSize) {
    std::vector<uint8_t> fixed(data, data + size);
    const size_t h = kiln::data::kShardHeaderSize;
    put_u32(fixed.data() + 44, kiln::data::crc32_of(fixed.data() + h, size - h));
    put_u32(fixed.data() + 60, kiln::data::crc32_of(fixed.data(), 60));
    try_shard(fixed.data(), size);
  }
  return 0;
}
