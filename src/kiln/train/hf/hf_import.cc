// train/hf/hf_import.cc — `kiln checkpoint import --format hf` (train/hf/hf_bert.h).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/io/bert_names.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/finite_check.h"
#include "kiln/io/safetensors.h"
#include "kiln/models/bert.h"
#include "kiln/train/hf/hf_bert.h"
#include "kiln/train/recipes/bert.h"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

// kiln's name for an HF tensor: a BertModel's names lack the "bert." of BertForPreTraining, and
// checkpoints converted from TF by old transformers name LayerNorm parameters gamma / beta.
std::string kiln_name(std::string name) {
  for (const char* base : {"embeddings.", "encoder.", "pooler."})
    if (name.rfind(base, 0) == 0) name = "bert." + name;
  for (const auto& [from, to] : {std::pair{".gamma", ".weight"}, std::pair{".beta", ".bias"}})
    if (name.ends_with(from)) name = name.substr(0, name.size() - std::string(from).size()) + to;
  return name;
}

// Buffers HF may save that are not parameters.
bool is_buffer(const std::string& name) {
  return name.ends_with("embeddings.position_ids") || name.ends_with("embeddings.token_type_ids");
}

std::vector<float> as_f32(const Tensor& t, const std::string& file, const std::string& name) {
  std::vector<float> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case DType::f32: v[i] = t.ptr<float>()[i]; break;
      case DType::f16: v[i] = f16_to_f32(t.ptr<uint16_t>()[i]); break;
      case DType::bf16: v[i] = bf16_to_f32(t.ptr<uint16_t>()[i]); break;
      case DType::f64: v[i] = float(t.ptr<double>()[i]); break;
      default: throw Error("{}: tensor '{}' is {}; kiln reads F64, F32, F16 and BF16", file, name, dtype_name(t.dtype));
    }
  }
  return v;
}

// The decoder of BertForPreTraining is tied to the word embeddings and the MLM bias: kiln holds
// one parameter for each pair, so the copies must agree.
void check_tied(const std::map<std::string, std::vector<float>>& tied, const ParamStore& store, int64_t vocab,
                const std::string& file) {
  for (const auto& [name, source] : {std::pair{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"},
                                     std::pair{"cls.predictions.decoder.bias", "cls.predictions.bias"}}) {
    const auto it = tied.find(name);
    if (it == tied.end()) continue;
    const ParamSpec& spec = *store.find(source);
    const float* values = store.host_values().data() + spec.offset;
    const size_t real = size_t(spec.numel / spec.shape[0] * vocab);
    if (it->second.size() != real || !std::equal(it->second.begin(), it->second.end(), values))
      throw Error("{}: tensor '{}' differs from '{}'; kiln ties them (one parameter)", file, name, source);
  }
}

BertTrainConfig read_config(const fs::path& hf_dir) {
  const fs::path file = hf_dir / "config.json";
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_file(file));
  } catch (const nlohmann::json::exception& e) {
    throw Error("{}: not valid JSON ({})", file.string(), e.what());
  }
  return bert_config_from_hf(config, file.string());
}

// Overwrites the parameters of `store` that `hf` holds; returns the names of those it lacks.
std::vector<std::string> load_tensors(const io::SafetensorsFile& hf, ParamStore& store, int64_t vocab,
                                      bool allow_non_finite) {
  const std::string file = hf.path().string();
  std::set<std::string> missing;
  for (const ParamSpec& s : store.specs()) missing.insert(s.name);
  std::map<std::string, std::vector<float>> tied;
  for (const std::string& hf_name : hf.names()) {
    const std::string name = kiln_name(hf_name);
    if (is_buffer(name)) continue;
    const Tensor t = hf.get(hf_name);
    if (!allow_non_finite) io::check_finite(t, file, hf_name);
    if (name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias") {
      tied[name] = as_f32(t, file, hf_name);
      continue;
    }
    const ParamSpec* spec = store.find(name);
    if (!spec)
      throw Error("{}: tensor '{}' has no counterpart in kiln's BertForPreTraining (no parameter '{}')", file, hf_name,
                  name);
    Shape expected = spec->shape;
    if (io::is_vocab_sized(name)) expected[0] = vocab;
    if (t.shape != expected)
      throw Error("{}: tensor '{}' has shape {}; config.json makes it {}", file, hf_name, shape_str(t.shape),
                  shape_str(expected));
    const std::vector<float> v = as_f32(t, file, hf_name);
    std::copy(v.begin(), v.end(), store.host_values().data() + spec->offset);
    missing.erase(name);
  }
  check_tied(tied, store, vocab, file);
  return {missing.begin(), missing.end()};
}

}  // namespace

HfImportSummary import_hf_bert(const fs::path& hf_dir, const fs::path& out, int64_t vocab_divisible_by, uint64_t seed,
                               bool allow_non_finite) {
  if (fs::exists(out) && !fs::is_empty(out))
    throw Error("{}: not empty; import into a new folder (nothing there is overwritten)", out.string());
  BertTrainConfig c = read_config(hf_dir);
  c.make_vocab_size_divisible_by = vocab_divisible_by;
  c.seed = int64_t(seed);
  const fs::path model_file = hf_dir / "model.safetensors";
  if (!fs::exists(model_file))
    throw Error("{}: missing (kiln reads safetensors checkpoints; convert pytorch_model.bin first)", model_file.string());
  // The model is allocated from config.json's sizes: they must fit the weights the file holds
  // (2 bytes each at the least, F16 / BF16) before anything is allocated.
  const int64_t body = *hf_bert_body_parameters(c);
  const uint64_t file_bytes = fs::file_size(model_file);
  if (uint64_t(body) > file_bytes / 2)
    throw Error("{}: vocab_size, hidden_size, num_hidden_layers and intermediate_size make {} parameters in the "
                "embeddings and encoder, more than {} ({} bytes) holds at 2 bytes each",
                (hf_dir / "config.json").string(), body, model_file.string(), file_bytes);

  ParamStore store;
  models::BertForPretraining model(bert_model_config(c), store);
  model.init_mlperf(seed);
  HfImportSummary s;
  s.initialised = load_tensors(io::SafetensorsFile::open(model_file), store, c.vocab_size, allow_non_finite);
  nlohmann::json meta = {{"step", 0},          {"optimizer_steps", 0}, {"skipped_steps", 0},
                         {"samples_consumed", 0}, {"evaluations", 0},  {"target_reached", false},
                         {"imported_from", hf_dir.string()}};
  add_run_settings(meta, bert_run_settings(c, int(c.max_position)));
  s.checkpoint = io::CheckpointManager(out, 1).save(0, store, {}, meta);
  return s;
}

}  // namespace kiln::train
