// tests/testing/tf_bundle_writer.h — TensorFlow TensorBundles written at test time by kiln's
// independent Python writers (tools/golden/write_tf_bundle.py, kiln_to_tf_bert.py) with the
// Debian Python; a test skips when that Python lacks numpy.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/testing/run_command.h"

namespace kiln::testing {

inline bool tf_writer_available() {
  static const bool ok = run_command("/usr/bin/python3 -c 'import numpy'").first == 0;
  return ok;
}

// Runs tools/golden/SCRIPT with `args`; fails the test (and returns its output) on a nonzero exit.
inline std::string run_golden_script(const std::string& script, const std::string& args) {
  const std::filesystem::path tools = std::filesystem::path(KILN_SOURCE_DIR) / "tools" / "golden";
  const auto [status, out] = run_command("/usr/bin/python3 " + (tools / script).string() + " " + args);
  EXPECT_EQ(status, 0) << script << " " << args << ":\n" << out;
  return out;
}

}  // namespace kiln::testing

#define KILN_REQUIRE_TF_WRITER()                                                           \
  do {                                                                                     \
    if (!::kiln::testing::tf_writer_available())                                           \
      GTEST_SKIP() << "/usr/bin/python3 with numpy is needed to write TensorBundles";      \
  } while (0)
