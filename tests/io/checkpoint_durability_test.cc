// A checkpoint save is complete or absent at every instant only if each file and folder is
// fsynced before it is published and the pointer file is written last. The save's fsync and
// rename calls, recorded in order by an LD_PRELOAD shim (tools/fs_trace/fs_trace.cc), must say so;
// removing any of those fsyncs or reordering the pointer fails this test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace {
namespace fs = std::filesystem;

struct Trace {
  std::vector<std::string> lines;

  // The first line at or after `from` that starts with `op` and ends with `suffix`; -1 if none.
  long find(const std::string& op, const std::string& suffix, long from = 0) const {
    for (long i = from; i < long(lines.size()); ++i) {
      const std::string& l = lines[size_t(i)];
      if (l.rfind(op + " ", 0) == 0 && l.size() >= suffix.size() && l.ends_with(suffix)) return i;
    }
    return -1;
  }
};

Trace read_trace(const fs::path& file) {
  Trace t;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) t.lines.push_back(line);
  return t;
}

TEST(CheckpointDurability, EveryFileAndFolderIsFsyncedBeforeItIsPublishedAndThePointerIsLast) {
  const fs::path dir = kiln::testing::unique_temp_dir("ckpt_durability");
  const fs::path ckpt = fs::weakly_canonical(dir / "ckpt");
  const auto [status, output] = kiln::testing::run_command(
      "LD_PRELOAD=" KILN_FS_TRACE_LIBRARY " KILN_FS_TRACE=" + (dir / "trace.txt").string() + " OMP_NUM_THREADS=1 " +
      KILN_BINARY " train bert --config " KILN_SOURCE_DIR "/configs/bert-tiny.toml --fake-data --seq-length 32"
      " --global-batch-size 4 --train-iters 2 --eval-interval 100 --save-interval 2 --save " + ckpt.string() +
      " --output-dir " + (dir / "out").string());
  ASSERT_EQ(status, 0) << output;
  const Trace t = read_trace(dir / "trace.txt");
  ASSERT_FALSE(t.lines.empty()) << "the shim recorded nothing";
  const std::string tmp = (ckpt / "iter_0000002.tmp").string(), final_dir = (ckpt / "iter_0000002").string();

  const long published = t.find("rename", tmp + " " + final_dir);
  ASSERT_GE(published, 0) << "no publishing rename";
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "meta.json"}) {
    const std::string written = tmp + "/" + file;
    const long renamed = t.find("rename", " " + written);  // FILE.tmp.PID -> FILE
    ASSERT_GE(renamed, 0) << file;
    const std::string temp_name = t.lines[size_t(renamed)].substr(7, t.lines[size_t(renamed)].find(' ', 7) - 7);
    const long synced = t.find("fsync", temp_name);
    EXPECT_GE(synced, 0) << file << " is never fsynced";
    EXPECT_LT(synced, renamed) << file << ": fsynced after it took its name";
    const long entry_synced = t.find("fsync", tmp, renamed + 1);  // the folder, holding the new name
    EXPECT_GE(entry_synced, 0) << file;
    EXPECT_LT(entry_synced, published) << file << ": its folder entry is not durable before the folder is published";
  }
  const long folder_synced = t.find("fsync", ckpt.string(), published + 1);
  const long pointer = t.find("rename", (ckpt / "latest_checkpointed_iteration.txt").string(), published + 1);
  ASSERT_GE(pointer, 0) << "the pointer file is not written after the checkpoint is published";
  EXPECT_GE(folder_synced, 0);
  EXPECT_LT(folder_synced, pointer) << "the published folder must be durable before the pointer names it";
  const std::string pointer_temp = t.lines[size_t(pointer)].substr(7, t.lines[size_t(pointer)].find(' ', 7) - 7);
  const long pointer_synced = t.find("fsync", pointer_temp, published + 1);
  EXPECT_GE(pointer_synced, 0);
  EXPECT_LT(pointer_synced, pointer) << "the pointer file is not fsynced before its rename";
  EXPECT_GE(t.find("fsync", ckpt.string(), pointer + 1), 0) << "the pointer's rename is never made durable";
}

}  // namespace

namespace {

// A disk that fills during a save (an LD_PRELOAD write that fails with ENOSPC past 80 MB under
// the checkpoint folder, tools/disk_full): the run stops naming the file, the previous checkpoint
// stays the pointer's and loads, and the failed save leaves no temporary behind.
TEST(CheckpointDurability, ADiskThatFillsDuringASaveKeepsThePreviousCheckpoint) {
  const fs::path dir = kiln::testing::unique_temp_dir("ckpt_disk_full_run");
  const fs::path ckpt = fs::weakly_canonical(dir / "ckpt");
  const std::string train = std::string(KILN_BINARY) + " train bert --config " KILN_SOURCE_DIR
                            "/configs/bert-tiny.toml --fake-data --seq-length 32 --global-batch-size 4 --train-iters 4"
                            " --eval-interval 100 --save-interval 2 --save " + ckpt.string() + " --load " +
                            ckpt.string() + " --output-dir " + (dir / "out").string();
  // Each checkpoint of BERT-tiny with LAMB is about 53 MB: the first fits, the second does not.
  const auto [full, full_output] = kiln::testing::run_command(
      "LD_PRELOAD=" KILN_DISK_FULL_LIBRARY " KILN_DISK_FULL_UNDER=" + ckpt.string() +
      " KILN_DISK_FULL_AFTER=80000000 OMP_NUM_THREADS=1 " + train);
  EXPECT_EQ(full, 2) << full_output;
  EXPECT_NE(full_output.find("kiln: error: " + (ckpt / "iter_0000004.tmp").string()), std::string::npos)
      << full_output;
  EXPECT_NE(full_output.find("write failed (disk full?)"), std::string::npos) << full_output;
  for (const auto& entry : fs::directory_iterator(ckpt))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path() << " left behind";
  // The previous checkpoint is the pointer's and resumes.
  const auto [resumed, resumed_output] = kiln::testing::run_command("OMP_NUM_THREADS=1 " + train);
  EXPECT_EQ(resumed, 0) << resumed_output;
  EXPECT_NE(resumed_output.find("iter_0000002 at step 2"), std::string::npos) << resumed_output;
}

}  // namespace
