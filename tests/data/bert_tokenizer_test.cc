#include "kiln/data/text/bert_tokenizer.h"

#include <gtest/gtest.h>

#include "data_test_util.h"
#include "kiln/core/error.h"

namespace kiln::data {
namespace {

using testing::test_vocab;
using Ids = std::vector<int32_t>;
using Strings = std::vector<std::string>;

const BertTokenizer& uncased() {
  static const BertTokenizer tokenizer(Vocab::load(test_vocab()));
  return tokenizer;
}

TEST(Vocab, LoadsSharedVocabWithSpecialIds) {
  const Vocab& v = uncased().vocab();
  EXPECT_EQ(v.size(), 30522);
  EXPECT_EQ(v.pad_id(), 0);
  EXPECT_EQ(v.unk_id(), 100);
  EXPECT_EQ(v.cls_id(), 101);
  EXPECT_EQ(v.sep_id(), 102);
  EXPECT_EQ(v.mask_id(), 103);
  EXPECT_EQ(v.id("hello"), 7592);
  EXPECT_EQ(v.token(7592), "hello");
  EXPECT_EQ(v.id("no-such-token-here"), -1);
  EXPECT_TRUE(v.is_continuation(v.id("##berries")));
  EXPECT_FALSE(v.is_continuation(v.id("straw")));
}

TEST(Vocab, ErrorsNameTheFile) {
  const auto dir = testing::fresh_temp_dir("vocab-errors");
  const auto expect_error = [](const std::filesystem::path& p, const std::string& what) {
    try {
      Vocab::load(p);
      FAIL() << "no error for " << p;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  };
  expect_error(dir / "missing.txt", "not found");
  testing::write_text(dir / "empty.txt", "");
  expect_error(dir / "empty.txt", "empty");
  testing::write_text(dir / "no-mask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n");
  expect_error(dir / "no-mask.txt", "[MASK]");
  // Trailing \r\n and spaces are stripped; the id is the line index.
  testing::write_text(dir / "crlf.txt", "[PAD]\r\n[UNK]\r\n[CLS] \r\n[SEP]\r\n[MASK]\r\nhello\r\n");
  const Vocab v = Vocab::load(dir / "crlf.txt");
  EXPECT_EQ(v.cls_id(), 2);
  EXPECT_EQ(v.id("hello"), 5);
  std::filesystem::remove_all(dir);
}

TEST(BertTokenizer, EncodesKnownSentence) {
  EXPECT_EQ(uncased().encode("i like strawberries"), (Ids{1045, 2066, 13137, 20968}));
  EXPECT_EQ(uncased().tokenize("i like strawberries"), (Strings{"i", "like", "straw", "##berries"}));
  EXPECT_EQ(uncased().encode("unaffable"), (Ids{14477, 20961, 3468}));  // una ##ffa ##ble
}

TEST(BertTokenizer, LowerCasesAndStripsAccents) {
  EXPECT_EQ(uncased().basic_tokenize("Héllo, WÖRLD!"), (Strings{"hello", ",", "world", "!"}));
  EXPECT_EQ(uncased().encode("Héllo, WÖRLD!"), (Ids{7592, 1010, 2088, 999}));
  // Decomposed input (e + combining acute) gives the same result.
  EXPECT_EQ(uncased().encode("He\xCC\x81llo"), (Ids{7592}));
  // A word-final capital sigma lower-cases to the final form, as Python's str.lower().
  EXPECT_EQ(uncased().tokenize("ΟΔΟΣ"), (Strings{"ο", "##δ", "##ος"}));
  const BertTokenizer cased(Vocab::load(test_vocab()), false);
  EXPECT_EQ(cased.basic_tokenize("Héllo, World"), (Strings{"Héllo", ",", "World"}));
}

TEST(BertTokenizer, SplitsPunctuation) {
  EXPECT_EQ(uncased().tokenize("don't"), (Strings{"don", "'", "t"}));
  EXPECT_EQ(uncased().encode("don't $5^"), (Ids{2123, 1005, 1056, 1002, 1019, 1034}));
  // Unicode punctuation (em dash, U+2014) splits too.
  EXPECT_EQ(uncased().basic_tokenize("a\xE2\x80\x94" "b"), (Strings{"a", "\xE2\x80\x94", "b"}));
}

TEST(BertTokenizer, IsolatesCjkIdeographs) {
  EXPECT_EQ(uncased().basic_tokenize("中国人"), (Strings{"中", "国", "人"}));
  EXPECT_EQ(uncased().encode("x中国人y"), (Ids{1060, 1746, 1799, 1756, 1061}));
}

TEST(BertTokenizer, CleansControlAndWhitespaceCharacters) {
  // \x01 (Cc) and U+200B (Cf) are dropped, U+FFFD and NUL too; tab and NBSP (Zs) split words.
  EXPECT_EQ(uncased().encode(std::string("a\x01" "b", 3)), (Ids{11113}));
  EXPECT_EQ(uncased().encode("a\xE2\x80\x8B" "b"), (Ids{11113}));
  EXPECT_EQ(uncased().encode(std::string("a\0b\xEF\xBF\xBD", 6)), (Ids{11113}));
  EXPECT_EQ(uncased().encode("x\ty\xC2\xA0x"), (Ids{1060, 1061, 1060}));
  EXPECT_TRUE(uncased().encode(" \t\r\n ").empty());
}

TEST(BertTokenizer, UnknownWordsBecomeUnk) {
  // An emoji has no piece in the vocab: the whole word is [UNK], neighbours are unaffected.
  EXPECT_EQ(uncased().encode("hello x\xF0\x9F\x99\x82y x"), (Ids{7592, 100, 1060}));
  EXPECT_EQ(uncased().encode(std::string(101, 'a')), (Ids{100}));
  EXPECT_NE(uncased().encode(std::string(100, 'a')), (Ids{100}));
}

TEST(BertTokenizer, DropsInvalidUtf8Bytes) {
  EXPECT_EQ(uncased().encode("hel\xFFlo"), (Ids{7592}));
  EXPECT_EQ(uncased().encode("hello \xE4\xB8"), (Ids{7592}));            // truncated sequence
  EXPECT_EQ(uncased().encode("\xC0\xAFhello"), (Ids{7592}));             // overlong '/'
  EXPECT_EQ(uncased().encode("\xED\xA0\x80hello"), (Ids{7592}));         // surrogate
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise.push_back(char((i * 2654435761u) >> 24));
  EXPECT_NO_THROW(uncased().encode(noise));
}

}  // namespace
}  // namespace kiln::data
