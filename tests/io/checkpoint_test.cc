#include <gtest/gtest.h>

#include <filesystem>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/io/checkpoint.h"

namespace kiln::io {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_" + name);
  fs::remove_all(dir);
  return dir;
}

void make_store(ParamStore& store) {
  store.add("layer.weight", {3, 4}, true);
  store.add("layer.bias", {4}, false);
  store.allocate();
}

TEST(Checkpoint, RoundTripsParametersOptimizerStateAndMeta) {
  const fs::path dir = fresh_dir("ckpt_roundtrip");
  ParamStore store;
  make_store(store);
  Tensor m_t = Tensor::empty({store.size()}), v_t = Tensor::empty({store.size()});
  float* m = m_t.ptr<float>();
  float* v = v_t.ptr<float>();
  for (size_t i = 0; i < store.host_values().size(); ++i) {
    store.host_values()[i] = 0.5f * float(i) - 3.0f;
    m[i] = float(i) * 1e-3f;
    v[i] = float(i * i) * 1e-6f;
  }
  CheckpointManager manager(dir, 2);
  const fs::path saved = manager.save(7, store, {{"m", &m_t}, {"v", &v_t}}, {{"step", 7}});
  EXPECT_EQ(saved.filename(), "iter_0000007");
  EXPECT_EQ(read_file(dir / "latest_checkpointed_iteration.txt"), "7\n");
  ASSERT_TRUE(manager.latest());
  EXPECT_EQ(*manager.latest(), saved);

  ParamStore restored;
  make_store(restored);
  Tensor m2_t = Tensor::zeros({restored.size()}), v2_t = Tensor::zeros({restored.size()});
  const float* m2 = m2_t.ptr<float>();
  const float* v2 = v2_t.ptr<float>();
  const auto meta = load_checkpoint(saved, restored, {{"m", &m2_t}, {"v", &v2_t}});
  EXPECT_EQ(meta.at("step").get<int>(), 7);
  for (const ParamSpec& s : store.specs())
    for (int64_t i = 0; i < s.numel; ++i) {
      EXPECT_EQ(restored.host_values()[s.offset + i], store.host_values()[s.offset + i]);
      EXPECT_EQ(m2[s.offset + i], m[s.offset + i]);
      EXPECT_EQ(v2[s.offset + i], v[s.offset + i]);
    }
}

TEST(Checkpoint, KeepsOnlyTheNewestAndLeavesNoTempFiles) {
  const fs::path dir = fresh_dir("ckpt_keep");
  ParamStore store;
  make_store(store);
  CheckpointManager manager(dir, 2);
  for (int step : {1, 2, 3, 4}) manager.save(step, store, {}, {{"step", step}});
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"iter_0000003", "iter_0000004",
                                             "latest_checkpointed_iteration.txt"}));
}

TEST(Checkpoint, MissingOrMisshapenTensorIsAnErrorNamingIt) {
  const fs::path dir = fresh_dir("ckpt_mismatch");
  ParamStore small;
  small.add("layer.weight", {3, 4}, true);
  small.allocate();
  const fs::path saved = CheckpointManager(dir, 1).save(1, small, {}, {{"step", 1}});
  ParamStore bigger;
  make_store(bigger);
  try {
    load_checkpoint(saved, bigger, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer.bias"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, UnwritableDirectoryIsAnError) {
  EXPECT_THROW(CheckpointManager("/proc/kiln_cannot_write_here", 1), Error);
}

}  // namespace
}  // namespace kiln::io
