// tests/testing/cpuinfo.h — the "flags" line of /proc/cpuinfo, to check CPU detection against.
#pragma once
#include <fstream>
#include <string>

namespace kiln::testing {

// " fpu vme ... avx512f ... " with a space after the last flag ("" without /proc/cpuinfo), so
// that find(" name ") matches whole flags.
inline std::string cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return line + " ";
  return "";
}

}  // namespace kiln::testing
