// data/bert/prepare_bert.h — `kiln prepare bert`: text shards (one sentence per line, blank
// line between documents) -> .kbs sample shards, an eval set and a manifest.
//
// Sampling::reference (the default) makes the reference create_pretraining_data.py's samples:
// each input file is one part with its own CPython random.Random(seed), as the reference runs
// once per part file, and the eval file is another. Sampling::philox cuts each file's documents
// into parts of `documents_per_part`, each drawing from Philox keyed by (seed, part index).
// Each part becomes one shard; the output is byte-identical whatever the number of workers.
// A training part is made twice: the first pass learns the final shuffle, the second writes each
// sample to its place in the shard file, so memory holds a part's tokens but never its samples.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "kiln/data/bert/pretraining_instances.h"

namespace kiln::data {

enum class Sampling { reference, philox };

struct PrepareBertOptions {
  std::vector<std::filesystem::path> inputs;  // files, or directories of files (sorted)
  std::filesystem::path vocab;
  std::filesystem::path output;
  InstanceOptions instance;
  bool lower_case = true;
  uint64_t seed = 12345;
  int workers = 1;
  int64_t eval_samples = 10000;
  std::filesystem::path eval_input;  // empty: hold out eval_documents from the inputs
  int64_t eval_documents = 0;        // 0: 5% of the documents, at least 1
  Sampling sampling = Sampling::reference;
  int64_t documents_per_part = 1000;  // Sampling::philox only
  bool progress = true;              // a status line on stderr every few seconds
};

struct PrepareBertResult {
  int64_t train_documents = 0, eval_documents = 0;
  int64_t train_parts = 0, train_samples = 0;
  int64_t eval_instances = 0, eval_samples = 0;  // generated, kept
};

// Writes output/train/part-NNNNN.kbs, output/eval.kbs and output/manifest.json.
// Throws kiln::Error naming the path for missing inputs, no documents or unwritable output.
PrepareBertResult prepare_bert(const PrepareBertOptions& options);

}  // namespace kiln::data
