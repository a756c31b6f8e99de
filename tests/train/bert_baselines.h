// tests/train/bert_baselines.h — what a BERT that learned nothing scores on the eval set a run
// evaluates on: the masked-LM accuracy of always predicting the most frequent masked token, and
// the NSP/SOP accuracy of always predicting the majority label. Convergence tests require a clear
// margin above these, so that they prove learning rather than luck.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>

#include "kiln/data/bert/bert_batch.h"
#include "kiln/train/bert_data.h"
#include "kiln/train/config/bert_config.h"

namespace kiln::testing {

struct EvalBaselines {
  double mlm_most_frequent = 0;  // accuracy of predicting the eval set's most frequent masked token
  int32_t most_frequent_token = -1;
  double nsp_majority = 0;  // accuracy of predicting the eval set's majority NSP/SOP label
  double masked_tokens = 0;  // weight of the real masked tokens
  int64_t labelled_rows = 0;
};

// The eval set of evaluation number `eval_index` (0 = the first one the run does), read exactly
// as the BERT recipe reads it (the same data source, batches and eval-iters cap).
inline EvalBaselines eval_baselines(const train::BertTrainConfig& config, int64_t eval_index) {
  const auto data = train::open_bert_data(config);
  data->begin_eval(eval_index);
  data::BertBatch batch;
  std::map<int32_t, double> token_weight;
  EvalBaselines b;
  int64_t ones = 0, batches = 0;
  while (batches < config.eval_iters && data->next_eval(batch, int(config.eval_batch_size))) {
    ++batches;
    for (size_t k = 0; k < size_t(batch.batch) * size_t(batch.max_pred); ++k) {
      if (batch.masked_weights[k] <= 0) continue;
      token_weight[batch.masked_ids[k]] += batch.masked_weights[k];
      b.masked_tokens += batch.masked_weights[k];
    }
    for (int r = 0; r < batch.batch; ++r) {
      if (batch.nsp_labels[size_t(r)] < 0) continue;  // padding row
      ++b.labelled_rows;
      ones += batch.nsp_labels[size_t(r)] == 1;
    }
  }
  for (const auto& [token, weight] : token_weight)
    if (b.masked_tokens > 0 && weight / b.masked_tokens > b.mlm_most_frequent) {
      b.mlm_most_frequent = weight / b.masked_tokens;
      b.most_frequent_token = token;
    }
  if (b.labelled_rows > 0)
    b.nsp_majority = double(std::max(ones, b.labelled_rows - ones)) / double(b.labelled_rows);
  return b;
}

}  // namespace kiln::testing
