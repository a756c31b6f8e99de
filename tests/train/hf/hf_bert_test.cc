// Hugging Face interchange (train/hf/hf_bert.h, `kiln checkpoint export|import --format hf`): a
// trained BERT-tiny (vocab padded 18 -> 24) exports to a directory that an independent Python
// check (tools/golden/check_hf_bert.py, BertForPreTraining's state-dict keys) accepts; importing
// it back gives the trained tensors bitwise (the real vocab rows) and exporting that again gives
// the same files byte for byte; `--finetune` starts from it. A BertModel without heads is
// completed and the initialised tensors named; pre-LN models, unknown tensors and shape
// mismatches are refused naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/core/file_util.h"
#include "kiln/io/safetensors.h"
#include "kiln/train/hf/hf_bert.h"
#include "kiln/train/recipes/bert.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/error_of.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tf_bundle_writer.h"
#include "tests/train/tiny_runs.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;
using testing::error_of;
using testing::run_command;
using testing::with_flags;

const fs::path& work_dir() {
  static const fs::path dir = testing::unique_temp_dir("hf_bert");
  return dir;
}

const testing::TinyBert& data() {
  static const testing::TinyBert d = testing::tiny_bert(work_dir() / "data");
  return d;
}

fs::path vocab() { return work_dir() / "data" / "vocab.txt"; }

BertRunResult train(const std::vector<std::string>& extra) {
  const testing::ThreadsRestored threads;
  BertTrainConfig c;
  ConfigRegistry registry;
  register_bert_config(registry, c);
  testing::apply_flag_list(registry, with_flags(data().flags, with_flags({"--make-vocab-size-divisible-by", "8"}, extra)));
  finalize_bert_config(c, registry);
  std::ostringstream console;
  return train_bert(c, {}, console);
}

// A checkpoint of two trained steps (once per test process).
const fs::path& trained() {
  static const fs::path ckpt = [] {
    train({"--exit-interval", "2", "--save", (work_dir() / "ckpt").string(), "--save-interval", "2", "--output-dir",
           (work_dir() / "run").string()});
    return work_dir() / "ckpt";
  }();
  return ckpt;
}

std::pair<int, std::string> kiln(const std::string& args) { return run_command(std::string(KILN_BINARY) + " " + args); }

const fs::path& exported() {
  static const fs::path out = [] {
    const fs::path dir = work_dir() / "hf";
    const auto [status, text] = kiln("checkpoint export --format hf --load " + trained().string() + " --vocab " +
                                     vocab().string() + " --output " + dir.string());
    EXPECT_EQ(status, 0) << text;
    return dir;
  }();
  return out;
}

void expect_same_tensors(const fs::path& a_file, const fs::path& b_file, int64_t vocab_rows) {
  const io::SafetensorsFile a = io::SafetensorsFile::open(a_file), b = io::SafetensorsFile::open(b_file);
  ASSERT_EQ(a.names().size(), b.names().size());
  for (const std::string& name : a.names()) {
    const Tensor x = a.get(name), y = b.get(name);
    ASSERT_EQ(x.shape, y.shape) << name;
    int64_t n = x.numel();
    if (name == "bert.embeddings.word_embeddings.weight" || name == "cls.predictions.bias")
      n = n / x.shape[0] * vocab_rows;  // the padding rows are initialised anew
    EXPECT_TRUE(std::equal(x.ptr<float>(), x.ptr<float>() + n, y.ptr<float>())) << name;
  }
}

TEST(HfBert, ExportPassesTheIndependentCheckAndTheRoundTripIsExact) {
  const fs::path hf = exported();
  if (testing::tf_writer_available()) {
    EXPECT_EQ(testing::run_golden_script("check_hf_bert.py", hf.string()), "ok\n");
  }
  const nlohmann::json config = nlohmann::json::parse(read_file(hf / "config.json"));
  EXPECT_EQ(config["vocab_size"], 18);  // unpadded: the vocab file's size
  EXPECT_EQ(config["hidden_size"], 16);
  EXPECT_EQ(config["num_hidden_layers"], 1);
  EXPECT_EQ(read_file(hf / "vocab.txt"), read_file(vocab()));

  const fs::path back = work_dir() / "back";
  const auto [status, text] =
      kiln("checkpoint import --format hf " + hf.string() + " --output " + back.string() + " --make-vocab-size-divisible-by 8");
  ASSERT_EQ(status, 0) << text;
  EXPECT_EQ(text.find("initialised"), std::string::npos) << text;
  expect_same_tensors(trained() / "iter_0000002" / "model.safetensors", back / "iter_0000000" / "model.safetensors", 18);

  const fs::path again = work_dir() / "hf_again";
  ASSERT_EQ(kiln("checkpoint export --format hf --load " + back.string() + " --vocab " + vocab().string() +
                 " --output " + again.string()).first, 0);
  EXPECT_EQ(read_file(again / "model.safetensors"), read_file(hf / "model.safetensors"));
  EXPECT_EQ(read_file(again / "config.json"), read_file(hf / "config.json"));

  const BertRunResult tuned = train({"--load", back.string(), "--finetune", "--train-iters", "2", "--eval-interval",
                                     "100", "--output-dir", (work_dir() / "tuned").string()});
  EXPECT_EQ(tuned.losses.size(), 2u);
}

TEST(HfBert, ABertModelWithoutHeadsIsCompletedAndTheInitialisedTensorsNamed) {
  const io::SafetensorsFile full = io::SafetensorsFile::open(exported() / "model.safetensors");
  std::vector<std::pair<std::string, Tensor>> base;  // BertModel: no "bert." prefix, no cls.*
  for (const std::string& name : full.names())
    if (name.rfind("bert.", 0) == 0) base.emplace_back(name.substr(5), full.get(name));
  const fs::path dir = work_dir() / "base_model";
  fs::create_directories(dir);
  io::save_safetensors(dir / "model.safetensors", base);
  nlohmann::json config = nlohmann::json::parse(read_file(exported() / "config.json"));
  config["architectures"] = {"BertModel"};
  std::ofstream(dir / "config.json") << config.dump();

  const auto [status, text] = kiln("checkpoint import --format hf " + dir.string() + " --output " +
                                   (work_dir() / "base_ckpt").string() + " --make-vocab-size-divisible-by 8");
  ASSERT_EQ(status, 0) << text;
  for (const char* name : {"cls.predictions.bias", "cls.predictions.transform.dense.weight",
                           "cls.predictions.transform.LayerNorm.weight", "cls.seq_relationship.weight"})
    EXPECT_NE(text.find(std::string("checkpoint import: ") + name + " is not in the checkpoint: initialised"),
              std::string::npos) << text;
  EXPECT_EQ(text.find("bert.encoder.layer.0.output.dense.weight is not"), std::string::npos);
  const io::SafetensorsFile imported =
      io::SafetensorsFile::open(work_dir() / "base_ckpt" / "iter_0000000" / "model.safetensors");
  const Tensor a = imported.get("bert.encoder.layer.0.output.dense.weight");
  const Tensor b = full.get("bert.encoder.layer.0.output.dense.weight");
  EXPECT_TRUE(std::equal(a.ptr<float>(), a.ptr<float>() + a.numel(), b.ptr<float>()));
}

TEST(HfBert, PreLnAndHeadlessModelsAreRefusedOnExport) {
  const fs::path copy = work_dir() / "pre_ln_ckpt";
  fs::remove_all(copy);
  fs::copy(trained() / "iter_0000002", copy, fs::copy_options::recursive);
  nlohmann::json meta = nlohmann::json::parse(read_file(copy / "meta.json"));
  meta["run"]["model"]["pre_ln"] = true;
  std::ofstream(copy / "meta.json") << meta.dump();
  EXPECT_EQ(error_of([&] { export_hf_bert(copy, vocab(), work_dir() / "no"); }),
            (copy / "meta.json").string() +
                ": a pre-LN (Megatron) BERT cannot be expressed as Hugging Face BertForPreTraining, which is post-LN");
  meta["run"]["model"]["pre_ln"] = false;
  meta["run"]["model"]["bert_no_binary_head"] = true;
  std::ofstream(copy / "meta.json") << meta.dump();
  EXPECT_NE(error_of([&] { export_hf_bert(copy, vocab(), work_dir() / "no"); })
                .find("a BERT without the NSP head (--bert-no-binary-head) is not a Hugging Face BertForPreTraining"),
            std::string::npos);
}

TEST(HfBert, UnknownTensorsShapeMismatchesAndUntiedDecodersAreRefusedOnImport) {
  const io::SafetensorsFile full = io::SafetensorsFile::open(exported() / "model.safetensors");
  auto import_with = [&](const std::string& test, const std::function<void(std::vector<std::pair<std::string, Tensor>>&,
                                                                           nlohmann::json&)>& change) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const std::string& name : full.names()) tensors.emplace_back(name, full.get(name));
    nlohmann::json config = nlohmann::json::parse(read_file(exported() / "config.json"));
    change(tensors, config);
    const fs::path dir = work_dir() / test;
    fs::create_directories(dir);
    io::save_safetensors(dir / "model.safetensors", tensors);
    std::ofstream(dir / "config.json") << config.dump();
    return error_of([&] { import_hf_bert(dir, work_dir() / (test + "_ckpt"), 1, 1); });
  };
  const std::string extra = import_with("extra", [](auto& t, auto&) {
    t.emplace_back("bert.encoder.layer.3.output.dense.bias", Tensor::zeros({16}));
  });
  EXPECT_EQ(extra, (work_dir() / "extra" / "model.safetensors").string() +
                       ": tensor 'bert.encoder.layer.3.output.dense.bias' has no counterpart in kiln's "
                       "BertForPreTraining (no parameter 'bert.encoder.layer.3.output.dense.bias')");
  const std::string shape = import_with("shape", [](auto&, auto& config) { config["vocab_size"] = 19; });
  EXPECT_NE(shape.find("has shape (18, 16); config.json makes it (19, 16)"), std::string::npos) << shape;
  const std::string untied = import_with("untied", [](auto& t, auto&) {
    for (auto& [name, tensor] : t)
      if (name == "cls.predictions.decoder.bias") tensor = Tensor::zeros({18});
  });
  EXPECT_NE(untied.find("tensor 'cls.predictions.decoder.bias' differs from 'cls.predictions.bias'"), std::string::npos)
      << untied;
  EXPECT_EQ(error_of([&] { import_hf_bert(exported(), trained(), 1, 1); }),
            trained().string() + ": not empty; import into a new folder (nothing there is overwritten)");
  const std::string act = import_with("act", [](auto&, auto& config) { config["hidden_act"] = "relu"; });
  EXPECT_NE(act.find("hidden_act 'relu'"), std::string::npos) << act;
}

// config.json's sizes: each in [1, 2^31 - 1], the dropouts and layer_norm_eps in range, and the
// parameter count they make checked against 64 bits (2^40 x 2^40 wrapped around before).
TEST(HfBert, ConfigValuesAreRangeCheckedAndTheirProductsCannotOverflow) {
  const nlohmann::json tiny = {{"model_type", "bert"},           {"vocab_size", 18},
                               {"hidden_size", 16},              {"num_hidden_layers", 1},
                               {"num_attention_heads", 2},       {"intermediate_size", 32},
                               {"max_position_embeddings", 64},  {"type_vocab_size", 2}};
  const auto error_with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json config = tiny;
    config[key] = value;
    return error_of([&] { bert_config_from_hf(config, "hf/config.json"); });
  };
  EXPECT_EQ(error_with("hidden_size", int64_t(1) << 40),
            "hf/config.json: key 'hidden_size' is 1099511627776, expected 1 to 2147483647");
  EXPECT_EQ(error_with("intermediate_size", int64_t(1) << 40),
            "hf/config.json: key 'intermediate_size' is 1099511627776, expected 1 to 2147483647");
  EXPECT_EQ(error_with("vocab_size", UINT64_MAX),
            "hf/config.json: key 'vocab_size' is 18446744073709551615, expected 1 to 2147483647");
  EXPECT_EQ(error_with("num_hidden_layers", 0), "hf/config.json: key 'num_hidden_layers' is 0, expected 1 to 2147483647");
  EXPECT_EQ(error_with("type_vocab_size", -2), "hf/config.json: key 'type_vocab_size' is -2, expected 1 to 2147483647");
  EXPECT_EQ(error_with("hidden_dropout_prob", 1.5), "hf/config.json: key 'hidden_dropout_prob' is 1.5, expected [0, 1)");
  EXPECT_EQ(error_with("attention_probs_dropout_prob", -0.1),
            "hf/config.json: key 'attention_probs_dropout_prob' is -0.1, expected [0, 1)");
  EXPECT_EQ(error_with("layer_norm_eps", 0), "hf/config.json: key 'layer_norm_eps' is 0, expected (0, 1)");
  nlohmann::json wide = tiny;
  wide["hidden_size"] = wide["num_attention_heads"] = wide["intermediate_size"] = INT32_MAX;
  EXPECT_EQ(error_of([&] { bert_config_from_hf(wide, "hf/config.json"); }),
            "hf/config.json: vocab_size 18, hidden_size 2147483647, num_hidden_layers 1, intermediate_size "
            "2147483647, max_position_embeddings 64 and type_vocab_size 2 make more than 2^63 parameters");
  const BertTrainConfig c = bert_config_from_hf(tiny, "hf/config.json");
  // Embeddings (18 + 64 + 2) x 16 + 2 x 16; one layer 4 (16^2 + 16) + 2 x 16 x 32 + 32 + 16 + 4 x 16.
  EXPECT_EQ(hf_bert_body_parameters(c), (18 + 64 + 2) * 16 + 2 * 16 + 4 * (16 * 16 + 16) + 2 * 16 * 32 + 32 + 16 + 64);
}

// A config.json whose sizes make more weights than model.safetensors holds is refused before the
// model is allocated (it was allocated and initialised, then refused tensor by tensor).
TEST(HfBert, AConfigDescribingMoreWeightsThanTheFileHoldsIsRefusedBeforeAllocating) {
  const fs::path dir = work_dir() / "config_too_big";
  fs::create_directories(dir);
  fs::copy_file(exported() / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  nlohmann::json config = nlohmann::json::parse(read_file(exported() / "config.json"));
  config["hidden_size"] = 1024;
  config["intermediate_size"] = 4096;
  std::ofstream(dir / "config.json") << config.dump();
  const std::string error = error_of([&] { import_hf_bert(dir, work_dir() / "config_too_big_ckpt", 1, 1); });
  EXPECT_EQ(error, fmt::format("{}: vocab_size, hidden_size, num_hidden_layers and intermediate_size make 12651520 "
                               "parameters in the embeddings and encoder, more than {} ({} bytes) holds at 2 bytes each",
                               (dir / "config.json").string(), (dir / "model.safetensors").string(),
                               fs::file_size(dir / "model.safetensors")));
  EXPECT_FALSE(fs::exists(work_dir() / "config_too_big_ckpt"));
}

// A NaN in an imported Hugging Face tensor was imported with exit 0: it is refused naming the
// tensor and the file; --allow-non-finite imports it anyway.
TEST(HfBert, NonFiniteTensorsAreRefusedOnImportUnlessAllowed) {
  const io::SafetensorsFile full = io::SafetensorsFile::open(exported() / "model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : full.names()) {
    const Tensor t = full.get(name);
    Tensor copy = Tensor::empty(t.shape, t.dtype);
    std::copy_n(t.ptr<float>(), t.numel(), copy.ptr<float>());
    if (name == "bert.encoder.layer.0.output.dense.weight") copy.ptr<float>()[3] = std::nanf("");
    tensors.emplace_back(name, copy);
  }
  const fs::path dir = work_dir() / "nan";
  fs::create_directories(dir);
  io::save_safetensors(dir / "model.safetensors", tensors);
  fs::copy_file(exported() / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  const auto [status, text] = kiln("checkpoint import --format hf " + dir.string() + " --output " +
                                   (work_dir() / "nan_ckpt").string());
  EXPECT_EQ(status, 2);
  EXPECT_EQ(text, "kiln: error: " + (dir / "model.safetensors").string() +
                      ": tensor 'bert.encoder.layer.0.output.dense.weight' holds NaN at element 3 (1 of 512 values "
                      "are not finite); --allow-non-finite loads it anyway\n");
  EXPECT_FALSE(fs::exists(work_dir() / "nan_ckpt"));
  const auto [allowed, allowed_text] = kiln("checkpoint import --format hf " + dir.string() + " --output " +
                                            (work_dir() / "nan_allowed_ckpt").string() + " --allow-non-finite");
  ASSERT_EQ(allowed, 0) << allowed_text;
  const Tensor w = io::SafetensorsFile::open(work_dir() / "nan_allowed_ckpt" / "iter_0000000" / "model.safetensors")
                       .get("bert.encoder.layer.0.output.dense.weight");
  EXPECT_TRUE(std::isnan(w.ptr<float>()[3]));
}

}  // namespace
}  // namespace kiln::train
