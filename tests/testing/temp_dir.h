// tests/testing/temp_dir.h — paths under the system temp dir unique to this test process, so that
// two test runs at once (two developers, two CI jobs, ctest -j) never share a folder. They are
// removed when the test process exits (checkpoints of the MPI tests take about 0.5 GB a run);
// KILN_KEEP_TEST_DIRS=1 keeps them for a look after a failure.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace kiln::testing {

class TempDirs {
 public:
  void add(const std::filesystem::path& dir) { dirs_.push_back(dir); }
  ~TempDirs() {
    const char* keep = std::getenv("KILN_KEEP_TEST_DIRS");
    if (keep && std::string(keep) != "0") return;
    for (const std::filesystem::path& dir : dirs_) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  }

 private:
  std::vector<std::filesystem::path> dirs_;
};

inline TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

// <temp dir>/kiln_<name>_<pid>, not created; removed at exit.
inline std::filesystem::path unique_temp_path(const std::string& name) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kiln_" + name + "_" + std::to_string(::getpid()));
  temp_dirs().add(path);
  return path;
}

// unique_temp_path(name), emptied and created.
inline std::filesystem::path unique_temp_dir(const std::string& name) {
  const std::filesystem::path dir = unique_temp_path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kiln::testing
