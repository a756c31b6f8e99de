// tests/testing/mllog_events.h — an MLPerf log as a list of events to compare two runs by: each
// line without its time_ms, checkpoint_start / checkpoint_stop left out (a resumed log drops those
// of the checkpoint it resumed from).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/core/file_util.h"

namespace kiln::testing {

inline std::vector<std::string> mllog_events(const std::filesystem::path& log) {
  std::vector<std::string> out;
  std::istringstream in(read_file(log));
  for (std::string line; std::getline(in, line);) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line.substr(line.find('{')));
    const std::string key = j.at("key");
    if (key == "checkpoint_start" || key == "checkpoint_stop") continue;
    j.erase("time_ms");
    out.push_back(j.dump());
  }
  return out;
}

// Events whose key is `key`.
inline int64_t count_key(const std::vector<std::string>& events, const std::string& key) {
  int64_t n = 0;
  for (const auto& e : events) n += e.find("\"key\":\"" + key + "\"") != std::string::npos;
  return n;
}

// The value of the first event whose key is `key` (null when there is none).
inline nlohmann::json event_value(const std::filesystem::path& log, const std::string& key) {
  for (const std::string& e : mllog_events(log)) {
    const nlohmann::json j = nlohmann::json::parse(e);
    if (j.at("key") == key) return j.at("value");
  }
  return nullptr;
}

}  // namespace kiln::testing
