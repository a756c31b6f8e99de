// cli/tokenize_command.cc — `kiln tokenize`: stdin lines -> WordPiece ids (or tokens) per line.
#include <cstdio>
#include <iostream>
#include <string>

#include "kiln/cli/commands.h"
#include "kiln/data/text/bert_tokenizer.h"

namespace kiln::cli {

void add_tokenize_command(CLI::App& app) {
  struct Args {
    std::string vocab;
    bool tokens = false;
    bool no_lower_case = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("tokenize", "BERT-tokenize stdin, one output line per input line");
  cmd->add_option("--vocab", args->vocab, "WordPiece vocab file (one token per line)")->required();
  cmd->add_flag("--tokens", args->tokens, "print tokens instead of ids");
  cmd->add_flag("--no-lower-case", args->no_lower_case, "keep case and accents (cased vocabularies)");
  cmd->callback([args] {
    const data::BertTokenizer tokenizer(data::Vocab::load(args->vocab), !args->no_lower_case);
    std::ios::sync_with_stdio(false);
    std::string line, out;
    while (std::getline(std::cin, line)) {
      out.clear();
      for (const int32_t id : tokenizer.encode(line)) {
        if (!out.empty()) out.push_back(' ');
        if (args->tokens) {
          out += tokenizer.vocab().token(id);
        } else {
          out += std::to_string(id);
        }
      }
      out.push_back('\n');
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
  });
}

}  // namespace kiln::cli
