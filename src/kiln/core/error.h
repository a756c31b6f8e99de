// core/error.h — kiln::Error: one-line, user-facing messages that name the file / key / step.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kiln {

// Thrown for bad input and failed invariants; `main` prints what() on one line and exits 2.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  template <typename... Args>
  explicit Error(fmt::format_string<Args...> format, Args&&... args)
      : std::runtime_error(fmt::format(format, std::forward<Args>(args)...)) {}
};

// Internal invariant check that stays on in release builds.
#define KILN_CHECK(cond, ...)                                    \
  do {                                                           \
    if (!(cond)) throw ::kiln::Error(__VA_ARGS__);               \
  } while (0)

}  // namespace kiln
