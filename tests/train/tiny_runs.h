// tests/train/tiny_runs.h — the smallest runs that reach the MLPerf targets honestly, for the
// resume tests and the kill drills (a run that stops short of the target has no log the official
// checker accepts):
//   BERT: a synthetic corpus in which 85% of the words are "the"; a one-layer BERT of width 16
//         learns that in about 70 steps (masked-LM accuracy 0.72, below 1.0 as the checker wants).
//   ResNet: colour-coded image classes (JPEG, 16x16); one validation image is mislabelled, so
//         top-1 stays at most 15/16 < 1.0.
//   memorable_bert_corpus: eight sentences repeated in every document; BERT-tiny memorises them and
//         reaches the real MLPerf target (0.720) within a few hundred steps.
// Each writes its data under `dir` and returns the `kiln train` flags of the run. The runs use
// one thread: on models this small a second one only waits at barriers (ten times slower on a
// loaded machine); ThreadsRestored puts the process's OpenMP setting back after an in-process run.
#pragma once
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/data/bert/prepare_bert.h"
#include "kiln/data/image/jpeg_encode.h"
#include "tests/testing/test_data.h"

namespace kiln::testing {

struct ThreadsRestored {
  int threads = omp_get_max_threads();
  ~ThreadsRestored() { omp_set_num_threads(threads); }
};

struct TinyBert {
  std::filesystem::path data;    // `kiln prepare bert` output
  int64_t train_samples = 0;     // samples in one epoch of the training data
  std::vector<std::string> flags;
};

// Prepared samples of the memorable corpus under dir/data (dir/memo.txt its text), drawn with `sampling`.
inline std::filesystem::path memorable_bert_corpus(const std::filesystem::path& dir, data::Sampling sampling) {
  {
    std::ofstream text(dir / "memo.txt");
    for (int doc = 0; doc < 300; ++doc)
      text << "the quick brown fox jumps over the lazy dog.\n"
              "a journey of a thousand miles begins with a single step.\n"
              "all that glitters is not gold.\nthe early bird catches the worm.\n"
              "actions speak louder than words.\nknowledge is power and power corrupts.\n"
              "time and tide wait for no man.\nthe pen is mightier than the sword.\n\n";
  }
  data::PrepareBertOptions o;
  o.inputs = {dir / "memo.txt"};
  o.vocab = test_vocab();
  o.output = dir / "data";
  o.instance.max_seq_length = 32;
  o.instance.max_predictions = 5;
  o.instance.dupe_factor = 1;
  o.eval_documents = 40;
  o.eval_samples = 256;
  o.sampling = sampling;
  o.progress = false;
  data::prepare_bert(o);
  return o.output;
}

inline TinyBert tiny_bert(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::vector<std::string> words = {"the", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"};
  {
    std::ofstream vocab(dir / "vocab.txt");
    for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."}) vocab << t << "\n";
    for (const std::string& w : words) vocab << w << "\n";
  }
  {
    std::mt19937 rng(1);
    std::ofstream text(dir / "text.txt");
    for (int doc = 0; doc < 60; ++doc) {
      for (int sentence = 0; sentence < 6; ++sentence) {
        for (int w = 0; w < 8; ++w)
          text << (rng() % 100 < 85 ? words[0] : words[1 + rng() % (words.size() - 1)]) << " ";
        text << ".\n";
      }
      text << "\n";
    }
  }
  data::PrepareBertOptions o;
  o.inputs = {dir / "text.txt"};
  o.vocab = dir / "vocab.txt";
  o.output = dir / "data";
  o.instance.max_seq_length = 32;
  o.instance.max_predictions = 4;
  o.instance.dupe_factor = 1;
  o.eval_documents = 8;
  o.eval_samples = 64;
  o.sampling = data::Sampling::philox;  // the samples these runs were tuned on
  o.progress = false;
  const data::PrepareBertResult prepared = data::prepare_bert(o);
  return {o.output,
          prepared.train_samples,
          {"--data", o.output.string(), "--vocab", (dir / "vocab.txt").string(), "--vocab-size", "18",
           "--hidden-size", "16", "--num-layers", "1", "--num-attention-heads", "2", "--ffn-hidden-size", "32",
           "--max-position-embeddings", "32", "--global-batch-size", "8", "--train-iters", "200",
           "--eval-interval", "5", "--lr", "0.003", "--lr-warmup-iters", "5", "--seed", "7", "--log-interval",
           "100", "--threads", "1"}};
}

struct TinyResNet {
  std::filesystem::path data;  // train/<class>/, val/<class>/
  int64_t steps_per_epoch = 0;
  std::vector<std::string> flags;
};

inline TinyResNet tiny_resnet(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const int size = 16, classes = 4, per_class = 16, batch = 16;
  const int colours[classes][3] = {{200, 40, 40}, {40, 200, 40}, {40, 40, 200}, {128, 128, 128}};
  std::mt19937 rng(3);
  std::vector<uint8_t> pixels(size_t(size * size * 3));
  for (const auto& [split, count] : {std::pair{"train", classes * per_class}, {"val", 16}})
    for (int i = 0; i < count; ++i) {
      const int c = i % classes;
      const int label = std::string(split) == "val" && i == 0 ? 1 : c;  // one mislabelled
      for (size_t p = 0; p < pixels.size(); ++p)
        pixels[p] = uint8_t(std::clamp(colours[c][p % 3] + int(rng() % 121) - 60, 0, 255));
      const fs::path folder = dir / split / ("c" + std::to_string(label));
      fs::create_directories(folder);
      data::write_jpeg(folder / (std::to_string(i) + ".jpg"), pixels.data(), size, size, 3);
    }
  return {dir,
          classes * per_class / batch,
          {"--arch", "resnet18", "--width", "4", "--small-images", "--data", dir.string(), "--image-size", "16",
           "--eval-resize", "16", "--batch-size", std::to_string(batch), "--epochs", "16", "--lr", "0.5",
           "--warmup-epochs", "1", "--seed", "3", "--log-interval", "100", "--workers", "1", "--threads", "1"}};
}

}  // namespace kiln::testing
