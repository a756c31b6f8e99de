// Starting a BERT from a TF1 checkpoint (io/tf_bert_checkpoint.h): the MLPerf names map to
// kiln's; a bundle written from a kiln model by tools/golden/kiln_to_tf_bert.py (TF names,
// transposed kernels, unpadded vocab, optimizer slots, two shards) restores every parameter
// bitwise, leaving kiln's vocab padding as initialised; a missing or extra variable and a shape
// mismatch are errors naming the variable and the file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "kiln/io/checkpoint.h"
#include "kiln/io/tf_bert_checkpoint.h"
#include "kiln/models/bert.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tf_bundle_writer.h"

namespace kiln::io {
namespace {
namespace fs = std::filesystem;
using testing::error_of;

TEST(TfBertCheckpoint, MlperfNamesMapToKilnsAsTheReferenceDoes) {
  auto mapped = [](const std::string& tf) {
    const auto m = map_tf_bert_name(tf);
    return m ? m->name + (m->transpose ? " (transposed)" : "") : std::string("(skipped)");
  };
  EXPECT_EQ(mapped("bert/encoder/layer_3/attention/self/query/kernel"),
            "bert.encoder.layer.3.attention.self.query.weight (transposed)");
  EXPECT_EQ(mapped("bert/encoder/layer_11/output/LayerNorm/gamma"), "bert.encoder.layer.11.output.LayerNorm.weight");
  EXPECT_EQ(mapped("bert/embeddings/LayerNorm/beta"), "bert.embeddings.LayerNorm.bias");
  EXPECT_EQ(mapped("bert/embeddings/word_embeddings"), "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(mapped("bert/embeddings/token_type_embeddings"), "bert.embeddings.token_type_embeddings.weight");
  EXPECT_EQ(mapped("bert/pooler/dense/kernel"), "bert.pooler.dense.weight (transposed)");
  EXPECT_EQ(mapped("bert/pooler/dense/bias"), "bert.pooler.dense.bias");
  EXPECT_EQ(mapped("cls/predictions/transform/dense/kernel"), "cls.predictions.transform.dense.weight (transposed)");
  EXPECT_EQ(mapped("cls/predictions/output_bias"), "cls.predictions.bias");
  EXPECT_EQ(mapped("cls/seq_relationship/output_weights"), "cls.seq_relationship.weight");
  EXPECT_EQ(mapped("cls/seq_relationship/output_bias"), "cls.seq_relationship.bias");
  for (const char* slot : {"bert/pooler/dense/kernel/adam_m", "bert/pooler/dense/kernel/adam_v", "global_step",
                           "bert/pooler/dense/kernel/LAMB", "cls/predictions/output_bias/LAMB_1", "beta1_power",
                           "beta2_power"})
    EXPECT_EQ(mapped(slot), "(skipped)") << slot;
}

// A BERT whose vocab (18 real ids) is padded to 20 rows.
struct TinyModel {
  ParamStore store;
  models::BertForPretraining model;
  explicit TinyModel(uint64_t seed)
      : model({.vocab_size = 20, .hidden = 8, .layers = 2, .heads = 2, .intermediate = 16, .max_position = 16}, store) {
    model.init_mlperf(seed);
  }
  std::vector<float> values(const std::string& name) const {
    const ParamSpec* s = store.find(name);
    return {store.host_values().begin() + s->offset, store.host_values().begin() + s->offset + s->numel};
  }
};

// A TF bundle of `source`'s weights (kiln_to_tf_bert.py `args`); returns its directory.
fs::path tf_bundle_of(const TinyModel& source, const std::string& test, const std::string& args) {
  const fs::path dir = testing::unique_temp_dir("tf_bert_" + test);
  save_model(dir / "model.safetensors", source.store);
  fs::create_directories(dir / "tf");
  testing::run_golden_script("kiln_to_tf_bert.py", (dir / "model.safetensors").string() + " " +
                                                       (dir / "tf" / "model.ckpt-28252").string() + " " + args);
  return dir / "tf";
}

TEST(TfBertCheckpoint, AllWeightsComeBackBitwiseAndTheVocabPaddingKeepsItsInit) {
  KILN_REQUIRE_TF_WRITER();
  const TinyModel source(1);
  const fs::path tf = tf_bundle_of(source, "roundtrip", "--vocab-size 18 --shards 2");
  TinyModel target(2);
  const TinyModel initial(2);
  const TfImportSummary s = load_tf_bert_checkpoint(tf, target.store, 18);
  EXPECT_EQ(s.prefix, tf / "model.ckpt-28252");
  EXPECT_EQ(s.loaded, int64_t(target.store.specs().size()));
  EXPECT_EQ(s.skipped, 2 * s.loaded + 1);  // adam_m, adam_v each, and global_step
  for (const ParamSpec& spec : target.store.specs()) {
    std::vector<float> expected = source.values(spec.name);
    if (spec.name == "bert.embeddings.word_embeddings.weight" || spec.name == "cls.predictions.bias") {
      const size_t real = size_t(spec.numel / spec.shape[0] * 18);
      const std::vector<float> init = initial.values(spec.name);
      std::copy(init.begin() + real, init.end(), expected.begin() + real);
    }
    EXPECT_EQ(target.values(spec.name), expected) << spec.name;
  }
}

TEST(TfBertCheckpoint, AMissingVariableNamesTheParameterAndTheIndex) {
  KILN_REQUIRE_TF_WRITER();
  const TinyModel source(1);
  const fs::path tf = tf_bundle_of(source, "missing", "--vocab-size 18 --drop bert/pooler/dense/bias");
  TinyModel target(2);
  EXPECT_EQ(error_of([&] { load_tf_bert_checkpoint(tf, target.store, 18); }),
            (tf / "model.ckpt-28252.index").string() + ": no variable for the model's parameter 'bert.pooler.dense.bias' "
                "(1 of " + std::to_string(target.store.specs().size()) + " parameters missing)");
}

TEST(TfBertCheckpoint, AnExtraVariableIsRefusedByName) {
  KILN_REQUIRE_TF_WRITER();
  const TinyModel source(1);
  const fs::path tf = tf_bundle_of(source, "extra", "--vocab-size 18 --extra bert/encoder/layer_5/output/dense/bias");
  TinyModel target(2);
  EXPECT_EQ(error_of([&] { load_tf_bert_checkpoint(tf, target.store, 18); }),
            (tf / "model.ckpt-28252.index").string() + ": variable 'bert/encoder/layer_5/output/dense/bias' (3) has "
                "no counterpart in the model (no parameter 'bert.encoder.layer.5.output.dense.bias')");
}

TEST(TfBertCheckpoint, AShapeMismatchNamesBothShapes) {
  KILN_REQUIRE_TF_WRITER();
  const TinyModel source(1);
  const fs::path tf = tf_bundle_of(source, "shape", "--vocab-size 17");
  TinyModel target(2);
  EXPECT_EQ(error_of([&] { load_tf_bert_checkpoint(tf, target.store, 18); }),
            (tf / "model.ckpt-28252.index").string() + ": variable 'bert/embeddings/word_embeddings' has shape (17, 8); "
                "the model's 'bert.embeddings.word_embeddings.weight' needs (18, 8)");
}

// A NaN or Inf in the TF weights imported with exit 0 and trained on NaN: it is refused naming the
// variable and the data file, unless allow_non_finite (--allow-non-finite).
TEST(TfBertCheckpoint, NonFiniteValuesAreRefusedNamingTheVariableUnlessAllowed) {
  KILN_REQUIRE_TF_WRITER();
  TinyModel source(1);
  float* values = source.store.host_values().data();
  values[source.store.find("bert.pooler.dense.bias")->offset + 1] = std::numeric_limits<float>::quiet_NaN();
  values[source.store.find("bert.pooler.dense.bias")->offset + 5] = -std::numeric_limits<float>::infinity();
  const fs::path tf = tf_bundle_of(source, "nan", "--vocab-size 18");
  TinyModel target(2);
  EXPECT_EQ(error_of([&] { load_tf_bert_checkpoint(tf, target.store, 18); }),
            (tf / "model.ckpt-28252.data-00000-of-00001").string() +
                ": tensor 'bert/pooler/dense/bias' holds NaN at element 1 (2 of 8 values are not finite); "
                "--allow-non-finite loads it anyway");
  EXPECT_EQ(load_tf_bert_checkpoint(tf, target.store, 18, true).loaded, int64_t(target.store.specs().size()));
  const std::vector<float> bias = target.values("bert.pooler.dense.bias");
  EXPECT_TRUE(std::isnan(bias[1]));
  EXPECT_EQ(bias[5], -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace kiln::io
