// fuzz/fuzz_util.h — helpers shared by the libFuzzer targets: a per-process temp dir for
// parsers that take a path ($TMPDIR/kiln_fuzz_<pid>; scripts/fuzz.sh points TMPDIR into
// build-fuzz), and a read of every byte so ASan sees out-of-range data.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "kiln/core/error.h"

namespace kiln::fuzz {

inline const std::filesystem::path& temp_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("kiln_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::filesystem::path write_temp(const std::string& name, const uint8_t* data, size_t size) {
  const auto path = temp_dir() / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                std::streamsize(size));
  return path;
}

inline void touch(const void* data, size_t size) {
  const auto* p = static_cast<const volatile uint8_t*>(data);
  uint8_t sum = 0;
  for (size_t i = 0; i < size; ++i) sum ^= p[i];
  (void)sum;
}

}  // namespace kiln::fuzz
