// cli/prepare_command.cc — `kiln prepare bert`: text shards -> MLPerf BERT sample shards;
// `kiln prepare indexed`: JSON lines -> Megatron .bin/.idx.
#include <cstdio>
#include <memory>
#include <thread>

#include "kiln/cli/commands.h"
#include "kiln/data/bert/prepare_bert.h"
#include "kiln/data/indexed/prepare_indexed.h"

namespace kiln::cli {

namespace {

void add_prepare_indexed(CLI::App& prepare) {
  auto o = std::make_shared<data::PrepareIndexedOptions>();
  o->workers = int(std::max(1u, std::thread::hardware_concurrency()));
  auto tokenizer_type = std::make_shared<std::string>("BertWordPieceLowerCase");
  auto quiet = std::make_shared<bool>(false);
  CLI::App* cmd = prepare.add_subcommand(
      "indexed", "JSON lines -> Megatron-LM .bin/.idx (MMIDIDX), as tools/preprocess_data.py");
  cmd->add_option("--input", o->input, "JSON-lines file, one document per line")->required();
  cmd->add_option("--json-keys", o->json_keys, "keys to extract (one output pair per key)")->capture_default_str();
  cmd->add_option("--vocab,--vocab-file", o->vocab, "WordPiece vocab file")->required();
  cmd->add_option("--output-prefix", o->output_prefix, "writes <prefix>_<key>_{sentence,document}.{bin,idx}")
      ->required();
  cmd->add_option("--tokenizer-type", *tokenizer_type, "BertWordPieceLowerCase or BertWordPieceCase")
      ->check(CLI::IsMember({"BertWordPieceLowerCase", "BertWordPieceCase"}))
      ->capture_default_str();
  cmd->add_flag("--split-sentences", o->split_sentences, "one sequence per sentence (needed for BERT's SOP)");
  cmd->add_option("--workers", o->workers, "worker threads (output does not depend on it)")->capture_default_str();
  cmd->add_flag("--quiet", *quiet, "no progress lines");
  cmd->callback([o, tokenizer_type, quiet] {
    o->lower_case = *tokenizer_type == "BertWordPieceLowerCase";
    o->progress = !*quiet;
    const data::PrepareIndexedResult r = data::prepare_indexed(*o);
    for (const std::string& p : r.prefixes) std::printf("prepare indexed: wrote %s.bin and %s.idx\n", p.c_str(), p.c_str());
    std::printf("prepare indexed: %lld documents, %lld sequences, %lld tokens\n",
                static_cast<long long>(r.documents), static_cast<long long>(r.sequences),
                static_cast<long long>(r.tokens));
  });
}

}  // namespace

void add_prepare_command(CLI::App& app) {
  CLI::App* prepare = app.add_subcommand("prepare", "prepare training data");
  prepare->require_subcommand(1);
  auto o = std::make_shared<data::PrepareBertOptions>();
  o->workers = int(std::max(1u, std::thread::hardware_concurrency()));
  auto no_lower_case = std::make_shared<bool>(false);
  auto sampling = std::make_shared<std::string>("reference");
  // tinygrad's preparation variables (extra/datasets/wikipedia.py) set the same options; flags win.
  CLI::App* bert = prepare->add_subcommand(
      "bert", "text (one sentence per line, blank line between documents) -> .kbs sample shards");
  bert->add_option("--input", o->inputs, "text files or directories of them (sorted)")->required();
  bert->add_option("--vocab", o->vocab, "WordPiece vocab file")->required();
  bert->add_option("--output", o->output, "output directory (train/, eval.kbs, manifest.json)")
      ->envname("BASEDIR")
      ->required();
  bert->add_option("--max-seq-length", o->instance.max_seq_length, "tokens per sample")
      ->envname("MAX_SEQ_LENGTH")
      ->capture_default_str();
  bert->add_option("--max-predictions", o->instance.max_predictions, "masked positions per sample")
      ->envname("MAX_PREDICTIONS_PER_SEQ")
      ->capture_default_str();
  bert->add_option("--masked-lm-prob", o->instance.masked_lm_prob, "fraction of tokens to mask")
      ->envname("MASKED_LM_PROB")
      ->capture_default_str();
  bert->add_option("--dupe-factor", o->instance.dupe_factor, "passes over the documents")
      ->envname("DUPE_FACTOR")
      ->capture_default_str();
  bert->add_option("--short-seq-prob", o->instance.short_seq_prob, "probability of a shorter target length")
      ->envname("SHORT_SEQ_PROB")
      ->capture_default_str();
  bert->add_option("--seed", o->seed, "random seed")->envname("RANDOM_SEED")->capture_default_str();
  bert->add_option("--workers", o->workers, "worker threads (output does not depend on it)")
      ->envname("NUM_WORKERS")
      ->capture_default_str();
  bert->add_flag("--whole-word-masking", o->instance.whole_word_masking, "mask whole words");
  bert->add_flag("--no-lower-case", *no_lower_case, "keep case and accents (cased vocabularies)");
  bert->add_option("--eval-samples", o->eval_samples, "eval samples to keep")->capture_default_str();
  bert->add_option("--eval-input", o->eval_input, "eval text file (default: hold out documents)");
  bert->add_option("--eval-documents", o->eval_documents,
                   "documents held out for eval without --eval-input (default 5%, at least 1)");
  bert->add_option("--sampling", *sampling,
                   "reference: the MLPerf reference's samples exactly (CPython's random, one stream per "
                   "input file); philox: kiln's own streams per --documents-per-part documents")
      ->check(CLI::IsMember({"reference", "philox"}))
      ->capture_default_str();
  bert->add_option("--documents-per-part", o->documents_per_part,
                   "with --sampling philox: documents per part (the unit of RNG keying and of output shards)")
      ->capture_default_str();
  add_prepare_indexed(*prepare);
  bert->callback([o, no_lower_case, sampling] {
    o->lower_case = !*no_lower_case;
    o->sampling = *sampling == "philox" ? data::Sampling::philox : data::Sampling::reference;
    const data::PrepareBertResult r = data::prepare_bert(*o);
    std::printf("prepare bert: %lld training samples in %lld shards from %lld documents; "
                "%lld eval samples (of %lld generated from %lld documents) -> %s\n",
                static_cast<long long>(r.train_samples), static_cast<long long>(r.train_parts),
                static_cast<long long>(r.train_documents), static_cast<long long>(r.eval_samples),
                static_cast<long long>(r.eval_instances), static_cast<long long>(r.eval_documents),
                o->output.c_str());
  });
}

}  // namespace kiln::cli
