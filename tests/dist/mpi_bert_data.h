// tests/dist/mpi_bert_data.h — the small MLPerf-format BERT corpus the mpirun tests train on
// (sequences of 64 tokens, 10 predictions, 64 evaluation samples).
#pragma once
#include <filesystem>

#include "kiln/data/bert/prepare_bert.h"
#include "tests/data/data_test_util.h"
#include "tests/testing/test_data.h"

namespace kiln::testing {

inline std::filesystem::path prepared_mpi_bert_data(const std::filesystem::path& root) {
  data::testing::write_text(root / "sotu.txt", data::testing::sotu_sentences(300000));
  data::PrepareBertOptions o;
  o.inputs = {root / "sotu.txt"};
  o.vocab = test_vocab();
  o.output = root / "data";
  o.instance.max_seq_length = 64;
  o.instance.max_predictions = 10;
  o.instance.dupe_factor = 1;
  o.eval_documents = 4;
  o.eval_samples = 64;
  o.workers = 2;
  o.progress = false;
  data::prepare_bert(o);
  return o.output;
}

}  // namespace kiln::testing
