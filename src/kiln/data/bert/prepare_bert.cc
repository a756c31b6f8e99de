#include "kiln/data/bert/prepare_bert.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/core/philox.h"
#include "kiln/core/timer.h"
#include "kiln/data/bert/mapped_file.h"
#include "kiln/data/bert/part_rng.h"
#include "kiln/data/bert/python_random.h"
#include "kiln/data/bert/sample_shard.h"
#include "kiln/data/bert/text_documents.h"

namespace kiln::data {
namespace fs = std::filesystem;
namespace {

// RNG stream ids (the layer field of rng_stream) of the different random decisions.
constexpr uint32_t kTrainPartStream = 1, kEvalPartStream = 2, kEvalSelectStream = 3;

using Part = std::vector<DocumentSpan>;

std::vector<fs::path> expand_inputs(const std::vector<fs::path>& inputs) {
  KILN_CHECK(!inputs.empty(), "prepare bert: no input files given");
  std::vector<fs::path> files;
  for (const auto& input : inputs) {
    if (fs::is_directory(input)) {
      std::vector<fs::path> found;
      for (const auto& entry : fs::directory_iterator(input))
        if (entry.is_regular_file()) found.push_back(entry.path());
      std::sort(found.begin(), found.end());
      KILN_CHECK(!found.empty(), "input directory {}: no files", input.string());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      KILN_CHECK(fs::is_regular_file(input), "input file {}: not found", input.string());
      files.push_back(input);
    }
  }
  return files;
}

// Cuts `spans` into consecutive parts of `per_part`.
void append_parts(const std::vector<DocumentSpan>& spans, int64_t per_part, std::vector<Part>& parts) {
  for (size_t i = 0; i < spans.size(); i += size_t(per_part))
    parts.emplace_back(spans.begin() + long(i), spans.begin() + long(std::min(spans.size(), i + size_t(per_part))));
}

// Runs fn(0..count-1) on `workers` threads; fn returns the samples it produced, for the
// progress line. The first exception stops the remaining parts and is rethrown here.
void run_parts(size_t count, int workers, const char* what, bool progress,
               const std::function<int64_t(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> samples{0};
  size_t done = 0;
  std::exception_ptr failure;
  std::mutex mutex;
  std::condition_variable changed;
  const auto worker = [&] {
    for (size_t p = next++; p < count; p = next++) {
      try {
        samples += fn(p);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
        next = count;
      }
      std::lock_guard lock(mutex);
      ++done;
      changed.notify_all();
    }
  };
  Timer timer;
  std::vector<std::thread> threads;
  const size_t n_threads = std::min<size_t>(size_t(std::max(workers, 1)), std::max<size_t>(count, 1));
  for (size_t t = 0; t < n_threads; ++t) threads.emplace_back(worker);
  {
    std::unique_lock lock(mutex);
    double last_print = 0;
    while (done < count && !failure) {
      changed.wait_for(lock, std::chrono::seconds(3));
      const bool due = timer.seconds() - last_print >= 3 || done == count;
      if (progress && due && !failure) {
        last_print = timer.seconds();
        std::fprintf(stderr, "prepare bert: %s parts %zu/%zu, %lld samples, %.1f s\n", what, done,
                     count, static_cast<long long>(samples.load()), timer.seconds());
      }
    }
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<Document> tokenize_part(const Part& part, const std::vector<std::unique_ptr<MappedFile>>& files,
                                    const BertTokenizer& tokenizer) {
  std::vector<Document> docs;
  docs.reserve(part.size());
  for (const DocumentSpan& span : part) {
    docs.push_back(tokenize_document(files[span.file]->text().substr(span.begin, span.end - span.begin), tokenizer));
    files[span.file]->release(span.begin, span.end);
  }
  return docs;
}

std::string part_name(size_t p) { return fmt::format("part-{:05d}.kbs", p); }

// The eval instances kept of `generated`: instance int(k * generated / wanted), k < wanted. The
// reference computes the ratio in floating point (and repeats instances when it has fewer than
// it wants); philox sampling uses exact integers and keeps each instance at most once.
std::vector<int64_t> eval_picks(int64_t generated, int64_t wanted, Sampling sampling) {
  std::vector<int64_t> picks;
  if (generated < wanted)
    std::fprintf(stderr, "prepare bert: warning: only %lld eval instances, fewer than --eval-samples %lld; %s\n",
                 static_cast<long long>(generated), static_cast<long long>(wanted),
                 sampling == Sampling::reference ? "repeating some, as the reference does" : "keeping all");
  if (sampling == Sampling::reference) {
    const double ratio = double(generated) / double(wanted);
    for (int64_t k = 0; k < wanted; ++k) picks.push_back(int64_t(double(k) * ratio));
  } else if (generated < wanted) {
    picks.resize(size_t(generated));
    std::iota(picks.begin(), picks.end(), 0);
  } else {
    for (int64_t k = 0; k < wanted; ++k) picks.push_back(int64_t(static_cast<__int128>(k) * generated / wanted));
  }
  return picks;
}

}  // namespace

PrepareBertResult prepare_bert(const PrepareBertOptions& o) {
  validate(o.instance);
  KILN_CHECK(o.workers >= 1, "prepare bert: --workers {} must be at least 1", o.workers);
  KILN_CHECK(o.eval_samples >= 1, "prepare bert: --eval-samples {} must be at least 1", o.eval_samples);
  KILN_CHECK(o.eval_documents >= 0, "prepare bert: --eval-documents {} must not be negative", o.eval_documents);
  const bool reference = o.sampling == Sampling::reference;
  // The reference draws one random stream over each whole input file.
  const int64_t per_part = reference ? std::numeric_limits<int64_t>::max() : o.documents_per_part;
  KILN_CHECK(o.documents_per_part >= 1, "prepare bert: documents per part {} must be at least 1",
             o.documents_per_part);
  const std::vector<fs::path> inputs = expand_inputs(o.inputs);
  const BertTokenizer tokenizer(Vocab::load(o.vocab), o.lower_case);
  const Vocab& vocab = tokenizer.vocab();
  const std::string vocab_bytes = read_file(o.vocab);
  ensure_writable_dir(o.output);
  ensure_writable_dir(o.output / "train");

  // Map every input (the eval file last) and find its documents.
  std::vector<std::unique_ptr<MappedFile>> files;
  std::vector<std::vector<DocumentSpan>> file_docs;
  const bool eval_from_file = !o.eval_input.empty();
  std::vector<fs::path> all_files = inputs;
  if (eval_from_file) {
    KILN_CHECK(fs::is_regular_file(o.eval_input), "eval input file {}: not found", o.eval_input.string());
    all_files.push_back(o.eval_input);
  }
  for (size_t f = 0; f < all_files.size(); ++f) {
    files.push_back(std::make_unique<MappedFile>(all_files[f]));
    file_docs.push_back(scan_documents(files.back()->text(), uint32_t(f)));
    files.back()->release(0, files.back()->size());
  }
  int64_t total_docs = 0;
  for (size_t f = 0; f < inputs.size(); ++f) total_docs += int64_t(file_docs[f].size());
  KILN_CHECK(total_docs > 0, "prepare bert: no documents in the input files (first: {})", inputs[0].string());

  // Eval documents: the eval file, or a seeded random selection held out of the inputs.
  std::vector<uint8_t> held_out(size_t(total_docs), 0);
  std::vector<DocumentSpan> eval_spans;
  if (eval_from_file) {
    eval_spans = file_docs.back();
    KILN_CHECK(!eval_spans.empty(), "eval input file {}: no documents", o.eval_input.string());
  } else {
    const int64_t n_eval = o.eval_documents > 0 ? o.eval_documents : std::max<int64_t>(1, total_docs / 20);
    KILN_CHECK(n_eval < total_docs,
               "prepare bert: cannot hold out {} of {} documents for eval; use --eval-input or fewer "
               "--eval-documents", n_eval, total_docs);
    std::vector<int64_t> order(static_cast<size_t>(total_docs));
    std::iota(order.begin(), order.end(), 0);
    PartRng rng(o.seed, rng_stream(RngPurpose::data, kEvalSelectStream, 0));
    for (int64_t i = 0; i < n_eval; ++i)
      std::swap(order[size_t(i)], order[size_t(rng.randint(i, total_docs - 1))]);
    for (int64_t i = 0; i < n_eval; ++i) held_out[size_t(order[size_t(i)])] = 1;
  }

  std::vector<Part> train_parts, eval_parts;
  PrepareBertResult result;
  int64_t global = 0;
  for (size_t f = 0; f < inputs.size(); ++f) {
    // Parts are cut over the file's documents before the hold-out, so that part boundaries
    // do not move when the eval selection changes.
    for (size_t begin = 0; begin < file_docs[f].size(); begin += size_t(per_part)) {
      const size_t end = std::min(file_docs[f].size(), begin + size_t(per_part));
      Part part;
      for (size_t d = begin; d < end; ++d, ++global) {
        if (held_out[size_t(global)]) {
          eval_spans.push_back(file_docs[f][d]);
        } else {
          part.push_back(file_docs[f][d]);
        }
      }
      result.train_documents += int64_t(part.size());
      train_parts.push_back(std::move(part));
    }
  }
  result.eval_documents = int64_t(eval_spans.size());
  append_parts(eval_spans, per_part, eval_parts);

  const ShardLayout layout{o.instance.max_seq_length, o.instance.max_predictions, token_dtype_for(vocab.size())};
  // Hands the instances of part p's documents to `emit` as they are made; returns their output order.
  const auto generate = [&](const std::vector<Document>& documents, uint32_t stream, size_t p, const InstanceSink& emit) {
    if (reference) {
      PythonRandom rng(o.seed);
      return create_instances(documents, vocab, o.instance, rng, emit);
    }
    PartRng rng(o.seed, rng_stream(RngPurpose::data, stream, p));
    return create_instances(documents, vocab, o.instance, rng, emit);
  };

  // Training shards, one per part, made twice so that no part's samples are ever held: the first
  // pass learns the final order, the second writes each instance straight to its place.
  std::vector<int64_t> train_counts(train_parts.size());
  run_parts(train_parts.size(), o.workers, "train", o.progress, [&](size_t p) {
    const std::vector<Document> documents = tokenize_part(train_parts[p], files, tokenizer);
    const std::vector<uint32_t> order = generate(documents, kTrainPartStream, p, [](BertSample&&) {});
    std::vector<uint32_t> place(order.size());
    for (size_t i = 0; i < order.size(); ++i) place[order[i]] = uint32_t(i);
    SampleShardFileWriter shard(o.output / "train" / part_name(p), layout, uint32_t(vocab.size()), order.size());
    uint32_t made = 0;
    generate(documents, kTrainPartStream, p, [&](BertSample&& s) { shard.put(place[made++], s); });
    shard.finish();
    train_counts[p] = int64_t(order.size());
    return train_counts[p];
  });
  result.train_parts = int64_t(train_parts.size());
  result.train_samples = std::accumulate(train_counts.begin(), train_counts.end(), int64_t(0));
  KILN_CHECK(result.train_samples > 0, "prepare bert: the input files gave no training samples (first: {})",
             inputs[0].string());

  // Eval: count every part's instances (and learn their order), then regenerate keeping the picks.
  std::vector<int64_t> eval_counts(eval_parts.size());
  std::vector<std::vector<uint32_t>> eval_orders(eval_parts.size());
  run_parts(eval_parts.size(), o.workers, "eval (count)", o.progress, [&](size_t p) {
    eval_orders[p] = generate(tokenize_part(eval_parts[p], files, tokenizer), kEvalPartStream, p, [](BertSample&&) {});
    eval_counts[p] = int64_t(eval_orders[p].size());
    return eval_counts[p];
  });
  const int64_t n_instances = std::accumulate(eval_counts.begin(), eval_counts.end(), int64_t(0));
  KILN_CHECK(n_instances > 0, "prepare bert: the eval documents gave no samples");
  const std::vector<int64_t> picks = eval_picks(n_instances, o.eval_samples, o.sampling);
  std::vector<int64_t> part_first(eval_parts.size() + 1, 0);
  for (size_t p = 0; p < eval_parts.size(); ++p) part_first[p + 1] = part_first[p] + eval_counts[p];
  std::vector<std::vector<BertSample>> eval_picked(eval_parts.size());
  run_parts(eval_parts.size(), o.workers, "eval (pick)", o.progress, [&](size_t p) {
    const auto begin = std::lower_bound(picks.begin(), picks.end(), part_first[p]);
    const auto end = std::lower_bound(begin, picks.end(), part_first[p + 1]);
    std::vector<uint8_t> wanted(eval_orders[p].size(), 0);  // by the index of making
    for (auto it = begin; it != end; ++it) wanted[eval_orders[p][size_t(*it - part_first[p])]] = 1;
    std::map<uint32_t, BertSample> kept;
    uint32_t made = 0;
    generate(tokenize_part(eval_parts[p], files, tokenizer), kEvalPartStream, p, [&](BertSample&& s) {
      if (wanted[made]) kept.emplace(made, std::move(s));
      ++made;
    });
    for (auto it = begin; it != end; ++it) eval_picked[p].push_back(kept.at(eval_orders[p][size_t(*it - part_first[p])]));
    return int64_t(eval_picked[p].size());
  });
  SampleShardBuilder eval_shard(layout, uint32_t(vocab.size()));
  for (const auto& picked : eval_picked)
    for (const BertSample& s : picked) eval_shard.add(s);
  eval_shard.write(o.output / "eval.kbs");
  result.eval_instances = n_instances;
  result.eval_samples = int64_t(eval_shard.size());

  // Shards left from an earlier, larger run would otherwise be read as training data.
  std::set<std::string> current;
  for (size_t p = 0; p < train_parts.size(); ++p) current.insert(part_name(p));
  for (const auto& entry : fs::directory_iterator(o.output / "train"))
    if (entry.path().extension() == ".kbs" && !current.count(entry.path().filename().string()))
      fs::remove(entry.path());

  nlohmann::json manifest;
  manifest["format"] = "kiln-bert-samples";
  manifest["shard_version"] = kShardVersion;
  std::vector<std::string> input_names;
  for (const auto& f : inputs) input_names.push_back(f.string());
  manifest["inputs"] = input_names;
  manifest["options"] = {
      {"max_seq_length", o.instance.max_seq_length}, {"max_predictions", o.instance.max_predictions},
      {"masked_lm_prob", o.instance.masked_lm_prob}, {"short_seq_prob", o.instance.short_seq_prob},
      {"dupe_factor", o.instance.dupe_factor},       {"whole_word_masking", o.instance.whole_word_masking},
      {"lower_case", o.lower_case},                  {"seed", o.seed},
      {"eval_samples", o.eval_samples},              {"eval_input", o.eval_input.string()},
      {"eval_documents", o.eval_documents},          {"documents_per_part", o.documents_per_part},
      {"sampling", reference ? "reference" : "philox"}};
  manifest["vocab"] = {{"path", o.vocab.string()},
                       {"size", vocab.size()},
                       {"crc32", crc32_of(reinterpret_cast<const uint8_t*>(vocab_bytes.data()), vocab_bytes.size())}};
  manifest["documents"] = {{"train", result.train_documents}, {"eval", result.eval_documents}};
  manifest["train"] = {{"samples", result.train_samples}, {"shards", nlohmann::json::array()}};
  for (size_t p = 0; p < train_parts.size(); ++p)
    manifest["train"]["shards"].push_back({{"file", "train/" + part_name(p)}, {"samples", train_counts[p]}});
  manifest["eval"] = {{"file", "eval.kbs"}, {"samples", result.eval_samples}, {"instances_generated", n_instances}};
  write_file_atomic(o.output / "manifest.json", [&](std::ostream& out) { out << manifest.dump(2) << "\n"; });
  return result;
}

}  // namespace kiln::data
