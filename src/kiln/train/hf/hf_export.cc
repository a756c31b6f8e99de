// train/hf/hf_export.cc — `kiln checkpoint export --format hf` (train/hf/hf_bert.h).
#include <algorithm>
#include <cstring>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/data/text/vocab.h"
#include "kiln/io/bert_names.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/checkpoint_meta.h"
#include "kiln/io/safetensors.h"
#include "kiln/train/hf/hf_bert.h"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

fs::path find_checkpoint(const fs::path& load) {
  if (fs::exists(load / "meta.json")) return load;
  if (const auto latest = io::latest_checkpoint(load)) return *latest;
  throw Error("{}: no kiln checkpoint here (neither meta.json nor latest_checkpointed_iteration.txt)", load.string());
}

// The run's dropouts and epsilon, when the checkpoint recorded its resolved config (`kiln train`
// does); else BERT's defaults.
void read_model_extras(const io::CheckpointMeta& meta, BertTrainConfig& c) {
  const nlohmann::json& all = meta.json();
  if (!all.contains("config") || !all["config"].is_object()) return;
  const nlohmann::json& config = all["config"];
  auto value = [&](const char* key, double& field) {
    if (config.contains(key) && config[key].is_string()) field = std::stod(config[key].get<std::string>());
  };
  value("model.hidden_dropout", c.hidden_dropout);
  value("model.attention_dropout", c.attention_dropout);
  value("model.layer_norm_eps", c.layer_norm_eps);
  if (config.value("model.disable_dropout", std::string()) == "true") c.hidden_dropout = c.attention_dropout = 0;
}

BertTrainConfig config_from_meta(const io::CheckpointMeta& meta) {
  const std::string file = meta.file().string();
  if (meta.string("run.recipe") != "bert")
    throw Error("{}: a {} checkpoint; only BERT exports to Hugging Face", file, meta.string("run.recipe"));
  if (meta.boolean("run.model.pre_ln"))
    throw Error("{}: a pre-LN (Megatron) BERT cannot be expressed as Hugging Face BertForPreTraining, which is post-LN",
                file);
  if (meta.boolean("run.model.bert_no_binary_head"))
    throw Error("{}: a BERT without the NSP head (--bert-no-binary-head) is not a Hugging Face BertForPreTraining", file);
  BertTrainConfig c;
  c.vocab_size = meta.integer("run.model.vocab_size");
  c.hidden_size = meta.integer("run.model.hidden_size");
  c.num_layers = meta.integer("run.model.num_layers");
  c.num_heads = meta.integer("run.model.num_attention_heads");
  c.intermediate_size = meta.integer("run.model.intermediate_size");
  c.max_position = meta.integer("run.model.max_position_embeddings");
  c.type_vocab = meta.integer("run.model.type_vocab_size");
  read_model_extras(meta, c);
  return c;
}

// The first `rows` rows of `t` (a copy).
Tensor first_rows(const Tensor& t, int64_t rows) {
  Shape shape = t.shape;
  shape[0] = rows;
  Tensor out = Tensor::empty(shape, DType::f32);
  std::memcpy(out.ptr<float>(), t.ptr<float>(), size_t(out.numel()) * sizeof(float));
  return out;
}

}  // namespace

HfExportSummary export_hf_bert(const fs::path& load, const fs::path& vocab, const fs::path& out) {
  HfExportSummary s;
  s.checkpoint = find_checkpoint(load);
  const io::CheckpointMeta meta = io::CheckpointMeta::read(s.checkpoint);
  const BertTrainConfig c = config_from_meta(meta);
  s.vocab_size = data::Vocab::load(vocab).size();
  if (s.vocab_size > c.vocab_size)
    throw Error("{}: {} tokens, but the model in {} has {} embedding rows", vocab.string(), s.vocab_size,
                s.checkpoint.string(), c.vocab_size);

  const fs::path model_file = s.checkpoint / "model.safetensors";
  const io::SafetensorsFile model = io::SafetensorsFile::open(model_file);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : model.names()) {
    Tensor t = model.get(name);
    if (t.dtype != DType::f32) throw Error("{}: tensor '{}' is {}, expected f32", model_file.string(), name, dtype_name(t.dtype));
    if (io::is_vocab_sized(name)) t = first_rows(t, s.vocab_size);
    tensors.emplace_back(name, t);
  }
  // BertForPreTraining's state dict also holds the decoder, tied to the word embeddings and bias.
  for (const auto& [tied, source] : {std::pair{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"},
                                     std::pair{"cls.predictions.decoder.bias", "cls.predictions.bias"}}) {
    const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const auto& p) { return p.first == source; });
    if (it == tensors.end()) throw Error("{}: tensor '{}' is missing", model_file.string(), source);
    tensors.emplace_back(tied, it->second);
  }
  ensure_writable_dir(out);
  io::save_safetensors(out / "model.safetensors", tensors, {{"format", "pt"}});
  const nlohmann::json config = hf_bert_config_json(c, s.vocab_size);
  write_file_atomic(out / "config.json", [&](std::ostream& o) { o << config.dump(2) << "\n"; });
  const std::string vocab_text = read_file(vocab);
  write_file_atomic(out / "vocab.txt", [&](std::ostream& o) { o << vocab_text; });
  s.tensors = int64_t(tensors.size());
  return s;
}

}  // namespace kiln::train
