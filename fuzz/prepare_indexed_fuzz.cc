// fuzz/prepare_indexed_fuzz.cc — `kiln prepare indexed` (JSON lines -> .bin/.idx) on an
// arbitrary input file (sentence splitting for odd sizes), with the shared vocabulary.
#include "fuzz/fuzz_util.h"
#include "kiln/data/indexed/indexed_dataset.h"
#include "kiln/data/indexed/prepare_indexed.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::data;
  PrepareIndexedOptions o;
  o.input = kiln::fuzz::write_temp("input.jsonl", data, size);
  o.json_keys = {"text"};
  o.vocab = KILN_TEST_DATA_DIR "/vocab/bert-base-uncased-vocab.txt";
  o.output_prefix = (kiln::fuzz::temp_dir() / "out").string();
  o.progress = false;
  o.split_sentences = size % 2 == 1;
  try {
    const PrepareIndexedResult r = prepare_indexed(o);
    for (const auto& prefix : r.prefixes) IndexedDataset::open(prefix);  // must read back
  } catch (const kiln::Error&) {
  }
  return 0;
}
