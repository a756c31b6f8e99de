// tests/testing/error_of.h — the message of the kiln::Error a callable throws.
#pragma once
#include <functional>
#include <string>

#include "kiln/core/error.h"

namespace kiln::testing {

// e.what() of the kiln::Error `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace kiln::testing
