// train/hf/hf_bert.h — Hugging Face interchange of kiln's BERT checkpoints (`kiln checkpoint export /
// import --format hf`). kiln's parameter names are already those of transformers'
// BertForPreTraining; what differs is around them:
//   export  a kiln checkpoint -> OUT/config.json (BertConfig), OUT/model.safetensors (f32, the
//           vocabulary unpadded, plus the tied cls.predictions.decoder.weight / .bias that the
//           state dict of BertForPreTraining holds), OUT/vocab.txt. Post-LN models with the NSP
//           head only: a pre-LN (Megatron) model or one without the binary head is no
//           BertForPreTraining.
//   import  such a directory (or a plain BertModel's, names without "bert.", no cls.* heads) ->
//           a kiln checkpoint at step 0 that `kiln train bert --load DIR --finetune` starts from.
//           Missing parameters get kiln's MLPerf initialisation and are listed.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kiln/train/config/bert_config.h"

namespace kiln::train {

// The BertConfig of config.json for `c` with `vocab_size` real tokens.
nlohmann::json hf_bert_config_json(const BertTrainConfig& c, int64_t vocab_size);
// The model fields of a BertTrainConfig from config.json (`file` names it in errors): the
// architecture sizes, dropouts and layer_norm_eps; hidden_act must be "gelu" (kiln's erf GELU).
// Every size must lie in [1, 2^31 - 1], the dropouts in [0, 1), layer_norm_eps in (0, 1), and the
// parameter count must fit 64 bits; else a kiln::Error naming the file and the key.
BertTrainConfig bert_config_from_hf(const nlohmann::json& config, const std::string& file);
// The parameters of the embeddings and the encoder layers (what every BERT checkpoint holds: no
// pooler, no heads), or nullopt when the count leaves int64.
std::optional<int64_t> hf_bert_body_parameters(const BertTrainConfig& c);

struct HfExportSummary {
  std::filesystem::path checkpoint;  // the kiln checkpoint read
  int64_t tensors = 0, vocab_size = 0;
};

// `load`: a checkpoint folder (its newest checkpoint) or one iter_NNNNNNN folder. Throws
// kiln::Error naming the file for a model HF cannot express, a vocab larger than the model's, or
// a malformed checkpoint.
HfExportSummary export_hf_bert(const std::filesystem::path& load, const std::filesystem::path& vocab,
                               const std::filesystem::path& out);

struct HfImportSummary {
  std::filesystem::path checkpoint;       // the kiln checkpoint written
  std::vector<std::string> initialised;   // parameters the HF checkpoint lacked
};

// Reads HF_DIR/config.json and HF_DIR/model.safetensors, writes OUT/iter_0000000 (model only) and
// its pointer file; OUT must be new or empty. `vocab_divisible_by` pads the vocabulary as --make-vocab-size-divisible-by
// will in the run that loads it; `seed` initialises the missing parameters. A tensor kiln has no
// parameter for, or of another shape, or one holding NaN or Inf (unless `allow_non_finite`), is a
// kiln::Error naming it and the file. F64, F32, F16 and BF16 tensors are read.
HfImportSummary import_hf_bert(const std::filesystem::path& hf_dir, const std::filesystem::path& out,
                               int64_t vocab_divisible_by, uint64_t seed, bool allow_non_finite = false);

}  // namespace kiln::train
