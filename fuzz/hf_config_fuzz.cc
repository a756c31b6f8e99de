// fuzz/hf_config_fuzz.cc — train::bert_config_from_hf (a Hugging Face BertConfig, config.json) on
// arbitrary bytes parsed as JSON. Anything wrong must be a kiln::Error; an accepted config has
// sizes in [1, 2^31 - 1] and a parameter count that fits 64 bits.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_util.h"
#include "kiln/train/hf/hf_bert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json config = nlohmann::json::parse(data, data + size, nullptr, false);
  if (config.is_discarded()) return 0;
  try {
    const kiln::train::BertTrainConfig c = kiln::train::bert_config_from_hf(config, "config.json");
    for (const int64_t v : {c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.intermediate_size,
                            c.max_position, c.type_vocab})
      if (v < 1 || v > INT32_MAX) __builtin_trap();
    if (!kiln::train::hf_bert_body_parameters(c) || c.hidden_size % c.num_heads != 0) __builtin_trap();
  } catch (const kiln::Error&) {
  }
  return 0;
}
