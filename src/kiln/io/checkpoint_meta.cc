#include "kiln/io/checkpoint_meta.h"

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"

namespace kiln::io {
namespace fs = std::filesystem;

CheckpointMeta::CheckpointMeta(nlohmann::json json, fs::path file) : json_(std::move(json)), file_(std::move(file)) {}

CheckpointMeta CheckpointMeta::read(const fs::path& checkpoint) {
  const fs::path file = checkpoint / "meta.json";
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_file(file));
  } catch (const nlohmann::json::exception& e) {
    throw Error("{}: invalid JSON: {}", file.string(), e.what());
  }
  if (!json.is_object()) throw Error("{}: expected a JSON object", file.string());
  CheckpointMeta meta(std::move(json), file);
  if (!meta.contains("format"))
    throw Error("{}: key 'format' is missing: a checkpoint of format 1, this kiln reads format {}", file.string(),
                kCheckpointFormat);
  const int64_t format = meta.integer("format");
  if (format != kCheckpointFormat)
    throw Error("{}: checkpoint format {}, this kiln reads format {}", file.string(), format, kCheckpointFormat);
  return meta;
}

const nlohmann::json* CheckpointMeta::find(std::string_view key) const {
  const nlohmann::json* node = &json_;
  size_t begin = 0;
  while (true) {
    const size_t dot = key.find('.', begin);
    const std::string part(key.substr(begin, dot == std::string_view::npos ? std::string_view::npos : dot - begin));
    if (!node->is_object()) return nullptr;
    const auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    begin = dot + 1;
  }
}

bool CheckpointMeta::contains(std::string_view key) const { return find(key) != nullptr; }

const nlohmann::json& CheckpointMeta::at(std::string_view key) const {
  const nlohmann::json* value = find(key);
  if (!value) throw Error("{}: key '{}' is missing", file_.string(), key);
  return *value;
}

namespace {

[[noreturn]] void wrong_type(const fs::path& file, std::string_view key, const nlohmann::json& value,
                             const char* expected) {
  throw Error("{}: key '{}' is {}, expected {}", file.string(), key, value.dump(), expected);
}

}  // namespace

int64_t CheckpointMeta::integer(std::string_view key) const {
  const nlohmann::json& value = at(key);
  if (!value.is_number_integer()) wrong_type(file_, key, value, "an integer");
  return value.get<int64_t>();
}

bool CheckpointMeta::boolean(std::string_view key) const {
  const nlohmann::json& value = at(key);
  if (!value.is_boolean()) wrong_type(file_, key, value, "true or false");
  return value.get<bool>();
}

std::string CheckpointMeta::string(std::string_view key) const {
  const nlohmann::json& value = at(key);
  if (!value.is_string()) wrong_type(file_, key, value, "a string");
  return value.get<std::string>();
}

}  // namespace kiln::io
