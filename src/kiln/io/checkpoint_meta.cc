#include "kiln/io/checkpoint_meta.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

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
  meta.check_loss_scaler();
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

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// The values the integer keys kiln writes may take; any other integer key is an int64.
std::pair<int64_t, int64_t> integer_range(std::string_view key) {
  static const std::pair<std::string_view, std::pair<int64_t, int64_t>> kRanges[] = {
      {"step", {0, kInt64Max}},
      {"optimizer_steps", {0, kInt64Max}},
      {"skipped_steps", {0, kInt64Max}},
      {"samples_consumed", {0, kInt64Max}},
      {"evaluations", {0, kInt64Max}},
      {"mllog.bytes", {0, kInt64Max}},
      {"mllog.crc32c", {0, int64_t(UINT32_MAX)}},
      {"loss_scaler.growth_tracker", {0, kInt64Max}},
      {"loss_scaler.hysteresis_tracker", {0, kInt64Max}},
  };
  for (const auto& [name, range] : kRanges)
    if (key == name) return range;
  if (key.starts_with("run.model.")) return {1, int64_t(INT32_MAX)};  // the model's sizes
  return {std::numeric_limits<int64_t>::min(), kInt64Max};
}

[[noreturn]] void wrong_type(const fs::path& file, std::string_view key, const nlohmann::json& value,
                             const char* expected) {
  throw Error("{}: key '{}' is {}, expected {}", file.string(), key, value.dump(), expected);
}

}  // namespace

int64_t CheckpointMeta::integer(std::string_view key) const {
  const nlohmann::json& value = at(key);
  if (!value.is_number_integer()) wrong_type(file_, key, value, "an integer");
  const auto [low, high] = integer_range(key);
  // An unsigned JSON number above 2^63 - 1 would read as a negative int64.
  const bool in_range = value.is_number_unsigned()
                            ? value.get<uint64_t>() <= uint64_t(high) && (low <= 0 || value.get<uint64_t>() >= uint64_t(low))
                            : value.get<int64_t>() >= low && value.get<int64_t>() <= high;
  if (!in_range) throw Error("{}: key '{}' is {}, expected {} to {}", file_.string(), key, value.dump(), low, high);
  return value.get<int64_t>();
}

// Resuming hands "loss_scaler" to optim::LossScaler whole: its values are checked here, where
// the file is known.
void CheckpointMeta::check_loss_scaler() const {
  const nlohmann::json* state = find("loss_scaler");
  if (!state || state->is_null()) return;
  if (!state->is_object()) wrong_type(file_, "loss_scaler", *state, "an object");
  const nlohmann::json& scale = at("loss_scaler.scale");
  if (!scale.is_number() || !std::isfinite(scale.get<double>()) || !(scale.get<double>() > 0))
    wrong_type(file_, "loss_scaler.scale", scale, "a finite number above 0");
  integer("loss_scaler.growth_tracker");
  integer("loss_scaler.hysteresis_tracker");
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
