#include "kiln/backend/algo_cache.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <mutex>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/core/notice.h"

namespace kiln::ops {
namespace fs = std::filesystem;

AlgoCache::AlgoCache(fs::path file) : file_(std::move(file)) {
  if (!fs::exists(file_)) return;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(file_));
    for (const auto& [key, value] : j.at("winners").items()) winners_[key] = value.get<int>();
  } catch (const std::exception& e) {
    notice("algorithm cache {} is unreadable ({}); searching again", file_.string(), e.what());
    winners_.clear();
  }
}

std::optional<int> AlgoCache::find(const std::string& key) const {
  const std::lock_guard lock(mutex_);
  const auto it = winners_.find(key);
  if (it == winners_.end()) return std::nullopt;
  return it->second;
}

void AlgoCache::record(const std::string& key, int choice) {
  const std::lock_guard lock(mutex_);
  winners_[key] = choice;
  nlohmann::json j;
  j["winners"] = winners_;
  try {
    fs::create_directories(file_.parent_path());
    write_file_atomic(file_, [&](std::ostream& out) { out << j.dump(1) << "\n"; });
  } catch (const std::exception& e) {
    if (!write_failed_)
      notice("cannot write the algorithm cache {} ({}); winners kept for this run only", file_.string(), e.what());
    write_failed_ = true;
  }
}

fs::path AlgoCache::default_file() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir && *dir) return fs::path(dir) / "algorithms.json";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "kiln" / "algorithms.json";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".cache" / "kiln" / "algorithms.json";
}

AlgoCache& AlgoCache::process() {
  static AlgoCache cache(default_file());
  return cache;
}

bool algorithm_search_enabled() {
  const char* v = std::getenv("KILN_SEARCH");
  return !(v && std::string(v) == "0");
}

int choose_candidate(AlgoCache& cache, const std::string& key, int candidates, bool capturing,
                     const std::function<int()>& search) {
  if (candidates == 1 || !algorithm_search_enabled()) return 0;
  if (const std::optional<int> known = cache.find(key); known && *known < candidates) return *known;
  if (capturing) {
    static std::once_flag said;
    std::call_once(said, [&] {
      notice("{} was first met inside a graph capture, where no algorithm search runs: it takes the library's "
             "first choice in this process", key);
    });
    return 0;
  }
  const int best = search();
  if (best >= 0) cache.record(key, best);
  return best;
}

int fastest_candidate(int candidates, const std::function<double(int)>& time_ms) {
  int best = -1;
  double best_ms = 0;
  for (int i = 0; i < candidates; ++i) {
    const double ms = time_ms(i);
    if (ms >= 0 && (best < 0 || ms < best_ms)) best = i, best_ms = ms;
  }
  return best;
}

}  // namespace kiln::ops
