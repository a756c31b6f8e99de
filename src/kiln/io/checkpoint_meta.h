// io/checkpoint_meta.h — a checkpoint's meta.json, read so that a missing or mistyped key is one
// line naming the file and the key ("ckpt/iter_0000006/meta.json: key 'step' is missing"), never
// a JSON library exception. Nested keys are written with dots: "mllog.bytes" is meta["mllog"]["bytes"].
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kiln::io {

// The layout of meta.json this kiln writes (CheckpointManager::save adds it as "format") and the
// only one it reads. Format 1 is kiln before the number was recorded (no "format" key).
inline constexpr int64_t kCheckpointFormat = 2;

class CheckpointMeta {
 public:
  // Reads CHECKPOINT/meta.json. Throws kiln::Error naming the file when it cannot be read or
  // parsed, when its format is not kCheckpointFormat (both numbers in the message), or when
  // "loss_scaler" holds a scale that is not finite and positive or a tracker out of range.
  static CheckpointMeta read(const std::filesystem::path& checkpoint);
  CheckpointMeta(nlohmann::json json, std::filesystem::path file);

  const std::filesystem::path& file() const { return file_; }
  std::filesystem::path dir() const { return file_.parent_path(); }
  const nlohmann::json& json() const { return json_; }

  bool contains(std::string_view key) const;
  // The value at `key`; throws "FILE: key 'KEY' is missing" or "FILE: key 'KEY' is X, expected Y".
  const nlohmann::json& at(std::string_view key) const;
  // Range-checked: step, optimizer_steps, skipped_steps, samples_consumed, evaluations,
  // mllog.bytes and the loss scaler's trackers are 0 to 2^63 - 1, mllog.crc32c 0 to 2^32 - 1, run.model.* (sizes) 1 to 2^31 - 1,
  // any other key an int64 ("FILE: key 'step' is 18446744073709551615, expected 0 to ...").
  int64_t integer(std::string_view key) const;
  bool boolean(std::string_view key) const;
  std::string string(std::string_view key) const;

 private:
  const nlohmann::json* find(std::string_view key) const;
  void check_loss_scaler() const;
  nlohmann::json json_;
  std::filesystem::path file_;
};

}  // namespace kiln::io
