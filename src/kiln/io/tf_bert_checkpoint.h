// io/tf_bert_checkpoint.h — starting a BERT from a TensorFlow 1 checkpoint of Google's / MLPerf's
// BERT (the MLCommons `model.ckpt-28252`), mapping its variable names to kiln's (Hugging Face's)
// as the MLPerf references do: the path split on "/", `layer_N` -> `layer.N`, `kernel` -> `weight`
// transposed (TF stores (in, out)), `gamma` / `output_weights` -> `weight`, `beta` / `output_bias`
// -> `bias`, `*_embeddings` -> `*_embeddings.weight`. Optimizer slots and counters (any variable
// with a path component adam_m, adam_v, LAMB, LAMB_1, global_step, beta1_power, beta2_power) are
// skipped.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "kiln/nn/params.h"

namespace kiln::io {

struct TfNameMapping {
  std::string name;        // kiln's parameter name
  bool transpose = false;  // a dense `kernel`: (in, out) in TF, (out, in) in kiln
};

// kiln's name for TF variable `tf_name`; nullopt for optimizer slots and counters.
std::optional<TfNameMapping> map_tf_bert_name(const std::string& tf_name);

struct TfImportSummary {
  std::filesystem::path prefix;  // the checkpoint read
  int64_t loaded = 0, skipped = 0;
};

// Overwrites every parameter of `store` (a CPU store) from the TF checkpoint at `path` (see
// resolve_tf_checkpoint in io/tf_bundle.h). `vocab_size` is the unpadded vocabulary: the TF word
// embeddings and decoder bias have that many rows, kiln's may have more. A variable the model
// lacks, a parameter the checkpoint lacks, a shape mismatch, an unreadable dtype, a bad checksum
// or a value that is NaN or Inf (unless `allow_non_finite`) is a kiln::Error naming the variable
// and the file.
TfImportSummary load_tf_bert_checkpoint(const std::filesystem::path& path, ParamStore& store, int64_t vocab_size,
                                        bool allow_non_finite = false);

}  // namespace kiln::io
