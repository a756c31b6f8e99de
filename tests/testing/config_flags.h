// tests/testing/config_flags.h — drive a ConfigRegistry with command-line flags from a test,
// exactly as `kiln train` parses them.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "kiln/train/config/config_registry.h"

namespace kiln::testing {

// Parses `flags` (e.g. {"--lr", "0.1"}) and applies them; they win over anything applied before.
inline void apply_flag_list(train::ConfigRegistry& registry, std::vector<std::string> flags) {
  CLI::App app;
  registry.add_flags(app);
  flags.insert(flags.begin(), "kiln");
  std::vector<char*> argv;
  for (auto& f : flags) argv.push_back(f.data());
  app.parse(int(argv.size()), argv.data());
  registry.apply_flags();
}

// a followed by b.
inline std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// `flags` with `overrides` applied: a flag given in both takes the value from `overrides` (in
// place), others are appended. A flag is "--name value", or "--name" alone (a switch) when the
// next word is another flag. CLI11 refuses a flag given twice, hence this.
inline std::vector<std::string> with_flags(std::vector<std::string> flags, const std::vector<std::string>& overrides) {
  auto is_flag = [](const std::string& w) { return w.size() > 2 && w.rfind("--", 0) == 0; };
  for (size_t i = 0; i < overrides.size(); ++i) {
    const bool has_value = i + 1 < overrides.size() && !is_flag(overrides[i + 1]);
    size_t at = 0;
    while (at < flags.size() && flags[at] != overrides[i]) ++at;
    if (at == flags.size()) {
      flags.push_back(overrides[i]);
      if (has_value) flags.push_back(overrides[i + 1]);
    } else if (has_value) {
      flags[at + 1] = overrides[i + 1];
    }
    if (has_value) ++i;
  }
  return flags;
}

// A `Config` made from `flags` as `kiln train` makes it: registered, the flags applied, finalized
// (e.g. config_from_flags<BertTrainConfig>(register_bert_config, finalize_bert_config, flags)).
template <typename Config>
Config config_from_flags(void (*register_config)(train::ConfigRegistry&, Config&),
                         void (*finalize)(Config&, const train::ConfigRegistry&), std::vector<std::string> flags) {
  Config c;
  train::ConfigRegistry registry;
  register_config(registry, c);
  apply_flag_list(registry, std::move(flags));
  finalize(c, registry);
  return c;
}

// The same, from the preset `toml` (a path) with `flags` over it.
template <typename Config>
Config config_from_preset(void (*register_config)(train::ConfigRegistry&, Config&),
                          void (*finalize)(Config&, const train::ConfigRegistry&), const std::string& toml,
                          std::vector<std::string> flags) {
  Config c;
  train::ConfigRegistry registry;
  register_config(registry, c);
  registry.apply_toml(toml);
  apply_flag_list(registry, std::move(flags));
  finalize(c, registry);
  return c;
}

}  // namespace kiln::testing
