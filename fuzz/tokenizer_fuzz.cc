// fuzz/tokenizer_fuzz.cc — data::BertTokenizer::encode (uncased and cased) on arbitrary bytes,
// with the shared bert-base-uncased vocabulary loaded once.
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kiln/data/text/bert_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kiln::data::BertTokenizer;
  using kiln::data::Vocab;
  static const Vocab vocab = Vocab::load(KILN_TEST_DATA_DIR "/vocab/bert-base-uncased-vocab.txt");
  static const BertTokenizer uncased(vocab, true), cased(vocab, false);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const BertTokenizer* t : {&uncased, &cased})
      for (const int32_t id : t->encode(text))
        if (id < 0 || id >= vocab.size()) __builtin_trap();
  } catch (const kiln::Error&) {
  }
  return 0;
}
