#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "data_test_util.h"

namespace {

// Runs a shell command; returns (exit status, stdout+stderr).
std::pair<int, std::string> run(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  return {WEXITSTATUS(status), out};
}

TEST(TokenizeCommand, PrintsIdsOrTokensPerLine) {
  const std::string vocab = kiln::data::testing::shared_vocab().string();
  auto [rc, out] = run("printf 'i like strawberries\\n\\nHello!\\n' | " KILN_BINARY " tokenize --vocab " + vocab);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "1045 2066 13137 20968\n\n7592 999\n");
  std::tie(rc, out) = run("printf 'i like strawberries\\n' | " KILN_BINARY " tokenize --tokens --vocab " + vocab);
  EXPECT_EQ(out, "i like straw ##berries\n");
}

TEST(PrepareCommand, MissingInputIsAOneLineError) {
  auto [rc, out] = run(std::string(KILN_BINARY) + " prepare bert --input /nonexistent/x.txt --vocab " +
                       kiln::data::testing::shared_vocab().string() + " --output /tmp/kiln-never-written");
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "kiln: error: input file /nonexistent/x.txt: not found\n");
}

}  // namespace
