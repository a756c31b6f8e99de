#include "kiln/log/mllog.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/log/crc32c.h"

namespace kiln::log {
namespace {

void append_json(const Json& j, std::string& out) {
  switch (j.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : j.items()) {
        if (!first) out += ", ";
        first = false;
        out += Json(k).dump(-1, ' ', true);
        out += ": ";
        append_json(v, out);
      }
      out += '}';
      break;
    }
    case Json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < j.size(); ++i) {
        if (i) out += ", ";
        append_json(j[i], out);
      }
      out += ']';
      break;
    }
    case Json::value_t::number_float:
      KILN_CHECK(std::isfinite(j.get<double>()), "mllog: value {} is not finite", j.get<double>());
      out += j.dump();
      break;
    default:
      out += j.dump(-1, ' ', true);  // ensure_ascii, as Python's json.dumps
  }
}

}  // namespace

std::string mllog_json(const Json& value) {
  std::string out;
  append_json(value, out);
  return out;
}

std::string_view mllog_source_file(std::string_view path) {
  const size_t pos = path.rfind("/src/");
  if (pos != std::string_view::npos) return path.substr(pos + 5);
  if (path.starts_with("src/")) return path.substr(4);
  return path;
}

MlLogPosition mllog_end(const std::filesystem::path& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) throw Error("mllog file {}: cannot read it: {}", file.string(), std::strerror(errno));
  MlLogPosition end;
  std::vector<char> buffer(1 << 16);
  for (size_t got; (got = std::fread(buffer.data(), 1, buffer.size(), f)) > 0;) {
    end.crc32c = crc32c(buffer.data(), got, end.crc32c);
    end.bytes += got;
  }
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw Error("mllog file {}: read failed", file.string());
  return end;
}

MlLogger::MlLogger(const std::filesystem::path& file, bool echo_stdout)
    : path_(file), echo_stdout_(echo_stdout) {
  file_ = std::fopen(file.c_str(), "w");
  if (!file_) throw Error("mllog file {}: cannot create: {}", file.string(), std::strerror(errno));
}

MlLogger::MlLogger(const std::filesystem::path& file, bool echo_stdout, MlLogPosition at)
    : path_(file), echo_stdout_(echo_stdout) {
  file_ = std::fopen(file.c_str(), "r+");
  if (!file_) throw Error("mllog file {}: cannot open to continue it: {}", file.string(), std::strerror(errno));
  std::vector<char> buffer(1 << 16);
  while (position_.bytes < at.bytes) {
    const size_t want = size_t(std::min<uint64_t>(buffer.size(), at.bytes - position_.bytes));
    const size_t got = std::fread(buffer.data(), 1, want, file_);
    position_.crc32c = crc32c(buffer.data(), got, position_.crc32c);
    position_.bytes += got;
    if (got < want) break;
  }
  const auto fail = [&](const std::string& why) {
    std::fclose(file_);
    file_ = nullptr;
    throw Error("mllog file {}: {}", file.string(), why);
  };
  if (position_.bytes < at.bytes)
    fail(fmt::format("has {} bytes, the log to continue had {}", position_.bytes, at.bytes));
  if (position_.crc32c != at.crc32c)
    fail(fmt::format("its first {} bytes are not the log to continue (CRC-32C {:08x}, expected {:08x})", at.bytes,
                     position_.crc32c, at.crc32c));
  if (::ftruncate(::fileno(file_), off_t(at.bytes)) != 0 ||
      std::fseek(file_, 0, SEEK_END) != 0)
    fail(fmt::format("cannot cut it back to {} bytes: {}", at.bytes, std::strerror(errno)));
}

MlLogPosition MlLogger::position() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return position_;
}

MlLogger::~MlLogger() {
  if (file_) std::fclose(file_);
}

void MlLogger::event(std::string_view key, const Json& value, const Json& metadata, std::source_location where) {
  write("POINT_IN_TIME", key, value, metadata, where);
}

void MlLogger::start(std::string_view key, const Json& value, const Json& metadata, std::source_location where) {
  write("INTERVAL_START", key, value, metadata, where);
}

void MlLogger::end(std::string_view key, const Json& value, const Json& metadata, std::source_location where) {
  write("INTERVAL_END", key, value, metadata, where);
}

void MlLogger::write(std::string_view event_type, std::string_view key, const Json& value,
                     const Json& metadata, const std::source_location& where) {
  KILN_CHECK(metadata.is_null() || metadata.is_object(), "mllog key '{}': metadata must be an object", key);
  Json meta = Json::object();
  meta["file"] = std::string(mllog_source_file(where.file_name()));
  meta["lineno"] = where.line();
  if (metadata.is_object())
    for (const auto& [k, v] : metadata.items()) meta[k] = v;

  const int64_t time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  Json line = Json::object();
  line["namespace"] = "";
  line["time_ms"] = time_ms;
  line["event_type"] = std::string(event_type);
  line["key"] = std::string(key);
  line["value"] = value;
  line["metadata"] = std::move(meta);
  std::string text;
  try {
    text = ":::MLLOG " + mllog_json(line) + "\n";
  } catch (const Error& e) {
    throw Error("mllog key '{}': {}", key, e.what());
  }

  std::lock_guard<std::mutex> lock(mutex_);
  if (std::fputs(text.c_str(), file_) < 0 || std::fflush(file_) != 0)
    throw Error("mllog file {}: write failed: {}", path_.string(), std::strerror(errno));
  position_.bytes += text.size();
  position_.crc32c = crc32c(text.data(), text.size(), position_.crc32c);
  if (echo_stdout_) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace kiln::log
