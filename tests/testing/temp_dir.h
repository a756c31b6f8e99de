// tests/testing/temp_dir.h — paths under the system temp dir unique to this test process, so that
// two test runs at once (two developers, two CI jobs, ctest -j) never share a folder.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace kiln::testing {

// <temp dir>/kiln_<name>_<pid>, not created.
inline std::filesystem::path unique_temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("kiln_" + name + "_" + std::to_string(::getpid()));
}

// unique_temp_path(name), emptied and created.
inline std::filesystem::path unique_temp_dir(const std::string& name) {
  const std::filesystem::path dir = unique_temp_path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kiln::testing
