#include "kiln/data/text/sentence_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  for (const auto s : kiln::data::split_sentences(text)) out.emplace_back(s);
  return out;
}

using V = std::vector<std::string>;

TEST(SentenceSplitter, SplitsAtTerminatorsFollowedBySpace) {
  EXPECT_EQ(split("Hello world. How are you? Fine!  Great."), (V{"Hello world.", "How are you?", "Fine!", "Great."}));
  EXPECT_EQ(split("  no terminator at all  "), (V{"no terminator at all"}));
  EXPECT_EQ(split(""), V{});
  EXPECT_EQ(split("What?! Really."), (V{"What?!", "Really."}));
}

TEST(SentenceSplitter, KeepsDecimalsAbbreviationsAndInitialsTogether) {
  EXPECT_EQ(split("Pi is 3.14 today. Next one."), (V{"Pi is 3.14 today.", "Next one."}));
  EXPECT_EQ(split("Mr. Smith met Dr. Jones at St. Paul. They talked."),
            (V{"Mr. Smith met Dr. Jones at St. Paul.", "They talked."}));
  EXPECT_EQ(split("J. R. R. Tolkien wrote it. Yes."), (V{"J. R. R. Tolkien wrote it.", "Yes."}));
  EXPECT_EQ(split("Use tools, e.g. Hammers. Or i.e. this."), (V{"Use tools, e.g. Hammers.", "Or i.e. this."}));
  EXPECT_EQ(split("The U.S. Army won. Later."), (V{"The U.S. Army won.", "Later."}));
  EXPECT_EQ(split("See (Fig. 3) here. Done."), (V{"See (Fig. 3) here.", "Done."}));
}

TEST(SentenceSplitter, LowercaseAfterPeriodContinuesTheSentence) {
  EXPECT_EQ(split("It costs 5 dollars. and more. Then stop."), (V{"It costs 5 dollars. and more.", "Then stop."}));
}

TEST(SentenceSplitter, HandlesClosingQuotesAndBrackets) {
  EXPECT_EQ(split("He said \"Go home.\" Then he left."), (V{"He said \"Go home.\"", "Then he left."}));
  EXPECT_EQ(split("It ended (finally.) The next day."), (V{"It ended (finally.)", "The next day."}));
  EXPECT_EQ(split("She wrote \xE2\x80\x9CYes.\xE2\x80\x9D Then slept."),
            (V{"She wrote \xE2\x80\x9CYes.\xE2\x80\x9D", "Then slept."}));
}

TEST(SentenceSplitter, EllipsisBreaksOnlyBeforeASentenceStart) {
  EXPECT_EQ(split("Wait... what happened? Nothing... Fine."), (V{"Wait... what happened?", "Nothing...", "Fine."}));
  EXPECT_EQ(split("Well\xE2\x80\xA6 ok. So\xE2\x80\xA6 \"Yes\" he said."),
            (V{"Well\xE2\x80\xA6 ok.", "So\xE2\x80\xA6", "\"Yes\" he said."}));
}

TEST(SentenceSplitter, NewlinesAreOrdinaryWhitespace) {
  EXPECT_EQ(split("First line\nstill first. Second\n\nsentence."), (V{"First line\nstill first.", "Second\n\nsentence."}));
}

}  // namespace
