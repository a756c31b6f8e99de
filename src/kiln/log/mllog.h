// log/mllog.h — MLPerf `:::MLLOG` lines, byte-compatible with the Python mlperf_logging library:
//   :::MLLOG {"namespace": "", "time_ms": 1745532618573, "event_type": "INTERVAL_START",
//             "key": "run_start", "value": null, "metadata": {"file": "kiln/train/x.cc", "lineno": 9}}
// (one line; keys in that order, ", " and ": " separators, non-ASCII escaped, doubles shortest
// round-trip). Lines are appended to a file and flushed one by one, so a crash loses none; log from
// one rank only. A run resumed from a checkpoint continues its log: the checkpoint records the
// log's position (length and CRC-32C), and the resumed logger cuts the file back to it, dropping
// what the killed run wrote after the checkpoint.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <source_location>
#include <string>
#include <string_view>

namespace kiln::log {

using Json = nlohmann::ordered_json;

// `value` serialized as Python's json.dumps does; throws kiln::Error on NaN or infinity.
std::string mllog_json(const Json& value);

// The call-site file as the metadata names it: the part after the last "src/" directory
// ("/work/main/src/kiln/train/bert_trainer.cc" -> "kiln/train/bert_trainer.cc"), else unchanged.
std::string_view mllog_source_file(std::string_view path);

// How far a log was written: its length and the CRC-32C of those bytes.
struct MlLogPosition {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// The position at the end of the log `file` as it is now (to append to it); throws kiln::Error
// naming the file when it cannot be read.
MlLogPosition mllog_end(const std::filesystem::path& file);

class MlLogger {
 public:
  // Creates `file` empty, replacing any file there; throws kiln::Error naming it when that fails.
  MlLogger(const std::filesystem::path& file, bool echo_stdout);
  // Continues `file` at `at`: its first at.bytes bytes must be the log as it was then (their
  // CRC-32C is at.crc32c); what follows is cut off. Throws kiln::Error naming the file when it
  // is missing, shorter or different.
  MlLogger(const std::filesystem::path& file, bool echo_stdout, MlLogPosition at);
  ~MlLogger();
  MlLogger(const MlLogger&) = delete;
  MlLogger& operator=(const MlLogger&) = delete;

  // POINT_IN_TIME / INTERVAL_START / INTERVAL_END. `value`: null, number, string or bool (pass
  // doubles, not floats, so 0.9 prints as 0.9). `metadata` is merged after "file" and "lineno".
  void event(std::string_view key, const Json& value = nullptr, const Json& metadata = nullptr,
             std::source_location where = std::source_location::current());
  void start(std::string_view key, const Json& value = nullptr, const Json& metadata = nullptr,
             std::source_location where = std::source_location::current());
  void end(std::string_view key, const Json& value = nullptr, const Json& metadata = nullptr,
           std::source_location where = std::source_location::current());

  const std::filesystem::path& path() const { return path_; }
  MlLogPosition position() const;

 private:
  void write(std::string_view event_type, std::string_view key, const Json& value, const Json& metadata,
             const std::source_location& where);

  std::filesystem::path path_;
  bool echo_stdout_;
  std::FILE* file_ = nullptr;
  MlLogPosition position_;
  mutable std::mutex mutex_;
};

}  // namespace kiln::log
