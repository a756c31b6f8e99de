// tests/testing/exact_losses.h — a KILN_TEST_LOSS_LOG file as step -> loss in hexadecimal floating
// point (exact), for tests that compare runs bitwise.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

namespace kiln::testing {

// Each whole line's step and loss; a killed run's last line may be cut short and is left out.
inline std::map<int64_t, std::string> read_exact_losses(const std::filesystem::path& file) {
  std::map<int64_t, std::string> losses;
  std::ifstream f(file);
  if (!f) return losses;
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream in(text.substr(0, text.rfind('\n') + 1));
  int64_t step = 0;
  std::string loss;
  while (in >> step >> loss) losses[step] = loss;
  return losses;
}

}  // namespace kiln::testing
