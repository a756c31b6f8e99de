// fuzz/toml_config_fuzz.cc — train::ConfigRegistry::apply_toml of the BERT config on arbitrary
// bytes, then finalize_bert_config.
#include "fuzz/fuzz_util.h"
#include "kiln/train/config/bert_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = kiln::fuzz::write_temp("config.toml", data, size);
  kiln::train::ConfigRegistry registry;
  kiln::train::BertTrainConfig config;
  kiln::train::register_bert_config(registry, config);
  try {
    registry.apply_toml(path);
    kiln::train::finalize_bert_config(config, registry);
    (void)registry.resolved();
  } catch (const kiln::Error&) {
  }
  return 0;
}
