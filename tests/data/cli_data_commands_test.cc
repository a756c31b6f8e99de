#include <gtest/gtest.h>

#include <string>

#include "data_test_util.h"
#include "tests/testing/run_command.h"

namespace {

using kiln::testing::run_command;

TEST(TokenizeCommand, PrintsIdsOrTokensPerLine) {
  const std::string vocab = kiln::data::testing::test_vocab().string();
  auto [rc, out] = run_command("printf 'i like strawberries\\n\\nHello!\\n' | " KILN_BINARY " tokenize --vocab " + vocab);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "1045 2066 13137 20968\n\n7592 999\n");
  std::tie(rc, out) = run_command("printf 'i like strawberries\\n' | " KILN_BINARY " tokenize --tokens --vocab " + vocab);
  EXPECT_EQ(out, "i like straw ##berries\n");
}

TEST(PrepareCommand, MissingInputIsAOneLineError) {
  auto [rc, out] = run_command(std::string(KILN_BINARY) + " prepare bert --input /nonexistent/x.txt --vocab " +
                               kiln::data::testing::test_vocab().string() + " --output /tmp/kiln-never-written");
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "kiln: error: input file /nonexistent/x.txt: not found\n");
}

}  // namespace
