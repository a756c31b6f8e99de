// train/config/config_registry.h — typed configuration keys with one precedence rule for all recipes:
// defaults < preset file (TOML) < environment variables (tinygrad names) < command-line flags.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kiln::train {

// One configuration key: "section.name" in TOML, an optional environment variable and optional
// command-line flags, bound to a field of the recipe's config struct.
struct ConfigKey {
  std::string key;                 // "optim.lr"
  std::string env;                 // "OPT_BASE_LEARNING_RATE" or ""
  std::vector<std::string> flags;  // {"--lr"}; Megatron's names where they exist
  std::string help;
  std::function<void(const std::string& text, const std::string& source)> set;
  std::function<std::string()> get;
  bool is_switch = false;          // a boolean flag given without a value
  std::string type_name = "TEXT";  // what --help shows: INT, FLOAT, PATH or TEXT
};

class ConfigRegistry {
 public:
  void add_int(std::string key, int64_t* field, std::string env, std::vector<std::string> flags,
               std::string help);
  void add_float(std::string key, double* field, std::string env, std::vector<std::string> flags,
                 std::string help);
  void add_bool(std::string key, bool* field, std::string env, std::vector<std::string> flags,
                std::string help);
  void add_string(std::string key, std::string* field, std::string env,
                  std::vector<std::string> flags, std::string help);

  // Registers every key that has flags as a CLI11 option (string-valued; parsed by apply_flags).
  void add_flags(CLI::App& app);
  // Applies a TOML preset; an unknown key is an error naming the file and key.
  void apply_toml(const std::filesystem::path& file);
  // Applies environment variables that are set; a bad value names the variable.
  void apply_env();
  // "NAME=value (key)" for each variable apply_env took, in registration order: tinygrad's names
  // (DECAY, BS, ...) are common words, so the start of a run names what it read.
  const std::vector<std::string>& from_environment() const { return from_environment_; }
  // Applies flags the user gave (call after CLI parsing).
  void apply_flags();
  // Sets one key by name (e.g. from a checkpoint's saved config).
  void set(const std::string& key, const std::string& text, const std::string& source);

  bool was_set(const std::string& key) const { return set_keys_.count(key) > 0; }
  // (key, value) in registration order, for printing and saving the resolved config.
  std::vector<std::pair<std::string, std::string>> resolved() const;

 private:
  void add(ConfigKey key);
  std::vector<ConfigKey> keys_;
  std::vector<std::string> from_environment_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> flag_values_;  // flag text as given, per key
  std::map<std::string, CLI::Option*> flag_options_;
  std::set<std::string> set_keys_;
};

}  // namespace kiln::train
