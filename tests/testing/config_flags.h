// tests/testing/config_flags.h — drive a ConfigRegistry with command-line flags from a test,
// exactly as `kiln train` parses them.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "kiln/train/config_registry.h"

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

}  // namespace kiln::testing
