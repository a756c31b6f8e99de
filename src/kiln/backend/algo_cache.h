// backend/algo_cache.h — which algorithm won a timed search for one GEMM or convolution shape
// (tinygrad's BEAM role): the first run with a shape times the library's candidates once and
// keeps the winner's index under a key naming the GPU, the op, the shape and the dtypes; the
// winners are kept in a JSON file that later runs read back, so they search nothing.
// KILN_SEARCH=0: no search, the libraries' first (heuristic) choice.
// The file: $KILN_CACHE_DIR/algorithms.json, else $XDG_CACHE_HOME/kiln/..., else
// ~/.cache/kiln/...; written atomically after each new winner; one that cannot be read is
// said once on stderr and replaced.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace kiln::ops {

class AlgoCache {
 public:
  explicit AlgoCache(std::filesystem::path file);

  std::optional<int> find(const std::string& key) const;
  // Keeps `choice` for `key` and writes the file (a write that fails is said once; the choice
  // still holds for this process).
  void record(const std::string& key, int choice);
  const std::filesystem::path& file() const { return file_; }

  // The process's cache, at default_file().
  static AlgoCache& process();
  static std::filesystem::path default_file();

 private:
  std::filesystem::path file_;
  mutable std::mutex mutex_;
  std::map<std::string, int> winners_;
  bool write_failed_ = false;
};

// False when KILN_SEARCH=0.
bool algorithm_search_enabled();

// Which of a shape's `candidates` (ranked by the library's heuristic) runs it: the first when there
// is one or KILN_SEARCH=0; else the cache's winner; else, inside a graph capture (`capturing`:
// allocating and synchronising for a timed search are illegal there), the first, not recorded, so
// an eager run searches later; else search() (the index of the fastest, -1 when none ran),
// recorded. -1 only when the search found none.
int choose_candidate(AlgoCache& cache, const std::string& key, int candidates, bool capturing,
                     const std::function<int()>& search);

// The index in [0, candidates) of the smallest time_ms(i); a candidate whose time is negative
// (it failed to run) never wins. -1 when none ran.
int fastest_candidate(int candidates, const std::function<double(int)>& time_ms);

}  // namespace kiln::ops
