// train/hf/hf_bert_config.cc — config.json (transformers' BertConfig) to and from kiln's BERT config.
#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "kiln/core/error.h"
#include "kiln/train/hf/hf_bert.h"

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

namespace {

// a * b + c, or nullopt when it leaves int64.
std::optional<int64_t> mul_add(int64_t a, int64_t b, int64_t c) {
  int64_t product = 0, sum = 0;
  if (__builtin_mul_overflow(a, b, &product) || __builtin_add_overflow(product, c, &sum)) return std::nullopt;
  return sum;
}

}  // namespace

std::optional<int64_t> hf_bert_body_parameters(const BertTrainConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  // One encoder layer: Q, K, V and output projections, the feed-forward pair, two LayerNorms.
  const auto attention = mul_add(4 * H, H, 4 * H + 4 * H);  // 4 (H^2 + H) + 2 LayerNorms (2 H each)
  if (!attention) return std::nullopt;
  const auto feed_forward = mul_add(2 * H, I, I + H);
  if (!feed_forward || *attention > INT64_MAX - *feed_forward) return std::nullopt;
  // Word, position and token-type embeddings and their LayerNorm.
  int64_t tables = 0;
  if (__builtin_add_overflow(c.vocab_size, c.max_position, &tables) ||
      __builtin_add_overflow(tables, c.type_vocab, &tables))
    return std::nullopt;
  const auto embeddings = mul_add(tables, H, 2 * H);
  if (!embeddings) return std::nullopt;
  return mul_add(c.num_layers, *attention + *feed_forward, *embeddings);
}

BertTrainConfig bert_config_from_hf(const nlohmann::json& config, const std::string& file) {
  if (!config.is_object()) throw Error("{}: not a JSON object", file);
  // Sizes are ints in kiln's kernels (token ids are int32); 2^31 - 1 bounds each one, the
  // parameter count below bounds them together.
  constexpr int64_t kMaxSize = INT32_MAX;
  auto integer = [&](const char* key) {
    if (!config.contains(key)) throw Error("{}: key '{}' is missing", file, key);
    const nlohmann::json& v = config[key];
    if (!v.is_number_integer()) throw Error("{}: key '{}' is {}, expected an integer", file, key, v.dump());
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= uint64_t(kMaxSize)
                                                 : v.get<int64_t>() >= 1 && v.get<int64_t>() <= kMaxSize;
    if (!in_range) throw Error("{}: key '{}' is {}, expected 1 to {}", file, key, v.dump(), kMaxSize);
    return v.get<int64_t>();
  };
  // A number in [low, high) (in (low, high) when `open_low`), or `fallback` when absent.
  auto number = [&](const char* key, double fallback, double low, double high, bool open_low) {
    if (!config.contains(key)) return fallback;
    const nlohmann::json& v = config[key];
    if (!v.is_number()) throw Error("{}: key '{}' is {}, expected a number", file, key, v.dump());
    const double x = v.get<double>();
    if (!(open_low ? x > low : x >= low) || !(x < high))
      throw Error("{}: key '{}' is {}, expected {}{}, {})", file, key, v.dump(), open_low ? "(" : "[", low, high);
    return x;
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
  c.hidden_dropout = number("hidden_dropout_prob", 0.1, 0, 1, false);
  c.attention_dropout = number("attention_probs_dropout_prob", 0.1, 0, 1, false);
  c.layer_norm_eps = number("layer_norm_eps", 1e-12, 0, 1, true);
  if (c.hidden_size % c.num_heads != 0)
    throw Error("{}: hidden_size {} is not a multiple of num_attention_heads {}", file, c.hidden_size, c.num_heads);
  if (!hf_bert_body_parameters(c))
    throw Error("{}: vocab_size {}, hidden_size {}, num_hidden_layers {}, intermediate_size {}, "
                "max_position_embeddings {} and type_vocab_size {} make more than 2^63 parameters",
                file, c.vocab_size, c.hidden_size, c.num_layers, c.intermediate_size, c.max_position, c.type_vocab);
  return c;
}

}  // namespace kiln::train
