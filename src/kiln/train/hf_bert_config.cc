// train/hf_bert_config.cc — config.json (transformers' BertConfig) to and from kiln's BERT config.
#include <fmt/format.h>

#include "kiln/core/error.h"
#include "kiln/train/hf_bert.h"

namespace kiln::train {

nlohmann::json hf_bert_config_json(const BertTrainConfig& c, int64_t vocab_size) {
  return {{"architectures", nlohmann::json::array({"BertForPreTraining"})},
          {"model_type", "bert"},
          {"vocab_size", vocab_size},
          {"hidden_size", c.hidden_size},
          {"num_hidden_layers", c.num_layers},
          {"num_attention_heads", c.num_heads},
          {"intermediate_size", c.intermediate_size},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", c.hidden_dropout},
          {"attention_probs_dropout_prob", c.attention_dropout},
          {"max_position_embeddings", c.max_position},
          {"type_vocab_size", c.type_vocab},
          {"initializer_range", 0.02},
          {"layer_norm_eps", c.layer_norm_eps},
          {"pad_token_id", 0},
          {"position_embedding_type", "absolute"},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

BertTrainConfig bert_config_from_hf(const nlohmann::json& config, const std::string& file) {
  if (!config.is_object()) throw Error("{}: not a JSON object", file);
  auto integer = [&](const char* key) {
    if (!config.contains(key)) throw Error("{}: key '{}' is missing", file, key);
    if (!config[key].is_number_integer()) throw Error("{}: key '{}' is {}, expected an integer", file, key, config[key].dump());
    return config[key].get<int64_t>();
  };
  auto number = [&](const char* key, double fallback) {
    if (!config.contains(key)) return fallback;
    if (!config[key].is_number()) throw Error("{}: key '{}' is {}, expected a number", file, key, config[key].dump());
    return config[key].get<double>();
  };
  auto text = [&](const char* key, const char* fallback) {
    return config.contains(key) && config[key].is_string() ? config[key].get<std::string>() : std::string(fallback);
  };
  if (text("model_type", "bert") != "bert") throw Error("{}: model_type '{}' is not bert", file, text("model_type", ""));
  if (text("hidden_act", "gelu") != "gelu")
    throw Error("{}: hidden_act '{}': kiln's post-LN BERT uses the erf GELU (\"gelu\")", file, text("hidden_act", ""));
  if (text("position_embedding_type", "absolute") != "absolute")
    throw Error("{}: position_embedding_type '{}': kiln has absolute position embeddings only", file,
                text("position_embedding_type", ""));
  BertTrainConfig c;
  c.vocab_size = integer("vocab_size");
  c.hidden_size = integer("hidden_size");
  c.num_layers = integer("num_hidden_layers");
  c.num_heads = integer("num_attention_heads");
  c.intermediate_size = integer("intermediate_size");
  c.max_position = integer("max_position_embeddings");
  c.type_vocab = integer("type_vocab_size");
  c.hidden_dropout = number("hidden_dropout_prob", 0.1);
  c.attention_dropout = number("attention_probs_dropout_prob", 0.1);
  c.layer_norm_eps = number("layer_norm_eps", 1e-12);
  for (const int64_t v : {c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.intermediate_size, c.max_position,
                          c.type_vocab})
    if (v <= 0) throw Error("{}: model sizes must be positive", file);
  if (c.hidden_size % c.num_heads != 0)
    throw Error("{}: hidden_size {} is not a multiple of num_attention_heads {}", file, c.hidden_size, c.num_heads);
  return c;
}

}  // namespace kiln::train
