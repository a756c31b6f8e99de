// The proof of `--init-checkpoint` (issue 11): a BERT-tiny run started from a TensorFlow bundle
// holding a kiln checkpoint's weights (converted by tools/golden/kiln_to_tf_bert.py: TF names,
// transposed kernels, optimizer slots) has bitwise the same losses as the run that loads that kiln
// checkpoint with --finetune (weights only, step 0, same seed). A checkpoint found in --load takes
// precedence over --init-checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "kiln/train/config/bert_config.h"
#include "kiln/train/recipes/bert.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tf_bundle_writer.h"
#include "tests/train/tiny_runs.h"

namespace kiln::train {
namespace {
namespace fs = std::filesystem;
using testing::with_flags;

BertRunResult train(const testing::TinyBert& data, const std::vector<std::string>& extra, std::ostream& console) {
  BertTrainConfig c;
  ConfigRegistry registry;
  register_bert_config(registry, c);
  testing::apply_flag_list(registry, with_flags(data.flags, extra));
  finalize_bert_config(c, registry);
  return train_bert(c, {}, console);
}

TEST(TfInitCheckpoint, ARunFromTheImportedBundleMatchesFinetuningFromTheKilnCheckpointBitwise) {
  KILN_REQUIRE_TF_WRITER();
  const testing::ThreadsRestored threads;
  const fs::path dir = testing::unique_temp_dir("tf_init_checkpoint");
  const testing::TinyBert data = testing::tiny_bert(dir / "data");
  std::ostringstream console;
  train(data, {"--exit-interval", "4", "--save", (dir / "ckpt").string(), "--save-interval", "4", "--output-dir",
               (dir / "first").string()},
        console);
  const fs::path model = dir / "ckpt" / "iter_0000004" / "model.safetensors";
  ASSERT_TRUE(fs::exists(model)) << console.str();
  fs::create_directories(dir / "tf");
  testing::run_golden_script("kiln_to_tf_bert.py", model.string() + " " + (dir / "tf" / "model.ckpt-4").string());

  const std::vector<std::string> three = {"--train-iters", "3", "--eval-interval", "100"};
  std::ostringstream from_tf_console, finetuned_console, both_console;
  const BertRunResult from_tf =
      train(data, with_flags(three, {"--init-checkpoint", (dir / "tf").string(), "--output-dir", (dir / "a").string()}),
            from_tf_console);
  const BertRunResult finetuned = train(
      data, with_flags(three, {"--load", (dir / "ckpt").string(), "--finetune", "--output-dir", (dir / "b").string()}),
      finetuned_console);
  ASSERT_EQ(from_tf.losses.size(), 3u) << from_tf_console.str();
  EXPECT_EQ(from_tf.losses, finetuned.losses);  // bitwise: the same weights, seed and data
  EXPECT_NE(from_tf_console.str().find("from TensorFlow checkpoint " + (dir / "tf" / "model.ckpt-4").string()),
            std::string::npos)
      << from_tf_console.str();

  const BertRunResult both =
      train(data, with_flags(three, {"--load", (dir / "ckpt").string(), "--finetune", "--init-checkpoint",
                                     (dir / "missing").string(), "--output-dir", (dir / "c").string()}),
            both_console);
  EXPECT_EQ(both.losses, finetuned.losses);
  EXPECT_NE(both_console.str().find("--init-checkpoint " + (dir / "missing").string() + " not read: the weights come "
                                    "from " + (dir / "ckpt" / "iter_0000004").string()),
            std::string::npos)
      << both_console.str();
}

}  // namespace
}  // namespace kiln::train
