#include "kiln/train/config/config_registry.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "kiln/core/error.h"

namespace kiln::train {
namespace {

int64_t parse_int(const std::string& text, const std::string& key, const std::string& source) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    // Accept integral floats like "1e3" written in TOML or env.
    const double d = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || d != std::floor(d) || std::fabs(d) > 9e18)
      throw Error("{}: {}: expected an integer, got '{}'", source, key, text);
    return int64_t(d);
  }
  return v;
}

double parse_float(const std::string& text, const std::string& key, const std::string& source) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw Error("{}: {}: expected a number, got '{}'", source, key, text);
  return v;
}

bool parse_bool(const std::string& text, const std::string& key, const std::string& source) {
  if (text == "1" || text == "true" || text == "True" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "False" || text == "no" || text == "off")
    return false;
  throw Error("{}: {}: expected true/false or 1/0, got '{}'", source, key, text);
}

// PATH for keys that name files or folders, judged by the key's last part (data.dir,
// checkpoint.load, data.vocab_file, ...); TEXT otherwise.
std::string string_type_name(const std::string& key) {
  const std::string last = key.substr(key.rfind('.') + 1);
  for (const char* word : {"dir", "path", "file", "load", "save", "vocab", "prefix"})
    if (last.find(word) != std::string::npos) return "PATH";
  return "TEXT";
}

}  // namespace

void ConfigRegistry::add(ConfigKey key) {
  KILN_CHECK(!index_.count(key.key), "config key '{}' registered twice", key.key);
  index_[key.key] = keys_.size();
  keys_.push_back(std::move(key));
}

void ConfigRegistry::add_int(std::string key, int64_t* field, std::string env,
                             std::vector<std::string> flags, std::string help) {
  const std::string name = key;
  add({std::move(key), std::move(env), std::move(flags), std::move(help),
       [field, name](const std::string& t, const std::string& src) {
         *field = parse_int(t, name, src);
       },
       [field] { return std::to_string(*field); }, false, "INT"});
}

void ConfigRegistry::add_float(std::string key, double* field, std::string env,
                               std::vector<std::string> flags, std::string help) {
  const std::string name = key;
  add({std::move(key), std::move(env), std::move(flags), std::move(help),
       [field, name](const std::string& t, const std::string& src) {
         *field = parse_float(t, name, src);
       },
       [field] { return fmt::format("{}", *field); }, false, "FLOAT"});
}

void ConfigRegistry::add_bool(std::string key, bool* field, std::string env,
                              std::vector<std::string> flags, std::string help) {
  const std::string name = key;
  add({std::move(key), std::move(env), std::move(flags), std::move(help),
       [field, name](const std::string& t, const std::string& src) {
         *field = parse_bool(t, name, src);
       },
       [field] { return std::string(*field ? "true" : "false"); }, true});
}

void ConfigRegistry::add_string(std::string key, std::string* field, std::string env,
                                std::vector<std::string> flags, std::string help) {
  const std::string type_name = string_type_name(key);
  add({std::move(key), std::move(env), std::move(flags), std::move(help),
       [field](const std::string& t, const std::string&) { *field = t; },
       [field] { return *field; }, false, type_name});
}

void ConfigRegistry::set(const std::string& key, const std::string& text,
                         const std::string& source) {
  auto it = index_.find(key);
  if (it == index_.end()) throw Error("{}: unknown config key '{}'", source, key);
  keys_[it->second].set(text, source);
  set_keys_.insert(key);
}

void ConfigRegistry::add_flags(CLI::App& app) {
  for (auto& k : keys_) {
    if (k.flags.empty()) continue;
    std::string names;
    for (auto& f : k.flags) names += (names.empty() ? "" : ",") + f;
    const std::string help = k.help + " [" + k.key + (k.env.empty() ? "" : ", env " + k.env) + "]";
    flag_options_[k.key] = k.is_switch ? app.add_flag(names, help)
                                       : app.add_option(names, flag_values_[k.key], help)->type_name(k.type_name);
  }
}

void ConfigRegistry::apply_toml(const std::filesystem::path& file) {
  toml::table table;
  try {
    table = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    throw Error("{}: line {}: {}", file.string(), e.source().begin.line, e.description());
  } catch (const std::exception& e) {
    throw Error("{}: cannot read config: {}", file.string(), e.what());
  }
  const std::string source = "config " + file.string();
  std::function<void(const toml::table&, const std::string&)> walk =
      [&](const toml::table& t, const std::string& prefix) {
        for (auto&& [k, node] : t) {
          const std::string key = prefix.empty() ? std::string(k.str())
                                                 : prefix + "." + std::string(k.str());
          if (auto* sub = node.as_table()) {
            walk(*sub, key);
            continue;
          }
          std::string text;
          if (auto v = node.value<std::string>()) text = *v;
          else if (auto i = node.as_integer()) text = std::to_string(i->get());
          else if (auto f = node.as_floating_point()) text = fmt::format("{}", f->get());
          else if (auto b = node.as_boolean()) text = b->get() ? "true" : "false";
          else throw Error("{}: key '{}' has an unsupported value type", source, key);
          set(key, text, source);
        }
      };
  walk(table, "");
}

void ConfigRegistry::apply_env() {
  for (auto& k : keys_) {
    if (k.env.empty()) continue;
    if (const char* v = std::getenv(k.env.c_str())) {
      k.set(v, "environment variable " + k.env);
      set_keys_.insert(k.key);
      from_environment_.push_back(fmt::format("{}={} ({})", k.env, v, k.key));
    }
  }
}

void ConfigRegistry::apply_flags() {
  for (auto& [key, option] : flag_options_) {
    if (option->count() == 0) continue;
    const bool is_switch = keys_[index_.at(key)].is_switch;
    set(key, is_switch ? "true" : flag_values_[key], "flag " + option->get_name());
  }
}

std::vector<std::pair<std::string, std::string>> ConfigRegistry::resolved() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& k : keys_) out.emplace_back(k.key, k.get());
  return out;
}

}  // namespace kiln::train
