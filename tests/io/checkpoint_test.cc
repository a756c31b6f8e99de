#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/checkpoint_meta.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/temp_dir.h"

namespace kiln::io {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = kiln::testing::unique_temp_path(name);
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
  load_checkpoint(saved, restored, {{"m", &m2_t}, {"v", &v2_t}});
  EXPECT_EQ(CheckpointMeta::read(saved).integer("step"), 7);
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
  EXPECT_EQ(names, (std::vector<std::string>{".kiln.lock", "iter_0000003", "iter_0000004",
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

TEST(Checkpoint, SavingAStepAgainReplacesItAndThePointerStaysValid) {
  const fs::path dir = fresh_dir("ckpt_resave");
  ParamStore store;
  make_store(store);
  CheckpointManager manager(dir, 3);
  manager.save(5, store, {}, {{"version", 1}});
  store.host_values()[0] = 42.0f;
  const fs::path saved = manager.save(5, store, {}, {{"version", 2}});
  ASSERT_EQ(*latest_checkpoint(dir), saved);
  ParamStore restored;
  make_store(restored);
  load_checkpoint(saved, restored, {});
  EXPECT_EQ(CheckpointMeta::read(saved).integer("version"), 2);
  EXPECT_EQ(restored.host_values()[0], 42.0f);
  EXPECT_FALSE(fs::exists(dir / "iter_0000005.tmp"));
}

TEST(Checkpoint, KeepNeverDeletesTheCheckpointThePointerNames) {
  const fs::path dir = fresh_dir("ckpt_keep_pointer");
  ParamStore store;
  make_store(store);
  CheckpointManager manager(dir, 1);
  manager.save(5, store, {}, {{"step", 5}});
  const fs::path older = manager.save(3, store, {}, {{"step", 3}});  // e.g. after a rewind
  ASSERT_TRUE(fs::is_directory(older));
  EXPECT_EQ(*latest_checkpoint(dir), older);
}

TEST(Checkpoint, StaleTemporariesOfAKilledSaveAreRemovedOnStart) {
  const fs::path dir = fresh_dir("ckpt_stale");
  fs::create_directories(dir / "iter_0000009.tmp");
  { std::ofstream(dir / "iter_0000009.tmp" / "model.safetensors") << "partial"; }
  { std::ofstream(dir / "latest_checkpointed_iteration.txt.tmp.12345") << "9"; }
  CheckpointManager manager(dir, 1);
  EXPECT_FALSE(fs::exists(dir / "iter_0000009.tmp"));
  EXPECT_FALSE(fs::exists(dir / "latest_checkpointed_iteration.txt.tmp.12345"));
}

TEST(Checkpoint, ASecondRunOnTheSameFolderIsRefusedNamingTheFirst) {
  const fs::path dir = fresh_dir("ckpt_lock");
  CheckpointManager first(dir, 1);
  try {
    CheckpointManager second(dir, 1);
    FAIL() << "second manager took the lock";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(::getpid())), std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, LockIsReleasedWhenTheRunEnds) {
  const fs::path dir = fresh_dir("ckpt_lock_release");
  { CheckpointManager first(dir, 1); }
  EXPECT_NO_THROW(CheckpointManager(dir, 1));
}

// A disk that fills during a save: the save fails with a message naming the file, and the
// previous checkpoint and the pointer are untouched. RLIMIT_FSIZE stands in for a full disk.
TEST(Checkpoint, DiskFullDuringASaveKeepsThePreviousCheckpoint) {
  const fs::path dir = fresh_dir("ckpt_disk_full");
  ParamStore store;
  store.add("big.weight", {64, 1024}, true);  // 256 KiB
  store.allocate();
  CheckpointManager manager(dir, 2);
  const fs::path first = manager.save(1, store, {}, {{"step", 1}});

  struct rlimit saved_limit {};
  ::getrlimit(RLIMIT_FSIZE, &saved_limit);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved_limit;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    manager.save(2, store, {}, {{"step", 2}});
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved_limit);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  EXPECT_EQ(*latest_checkpoint(dir), first);
  ParamStore restored;
  restored.add("big.weight", {64, 1024}, true);
  restored.allocate();
  load_checkpoint(first, restored, {});
  EXPECT_EQ(CheckpointMeta::read(first).integer("step"), 1);
  EXPECT_FALSE(fs::exists(dir / "iter_0000002"));
}

// KILN_TEST_KILL_IN_SAVE kills the saving process at each phase of a save (keeping one
// checkpoint, so the save prunes the previous one): the pointer always names a complete
// checkpoint that loads, and the next manager cleans up the temporaries.
TEST(Checkpoint, KilledAtEveryPhaseOfASaveThePointerNamesACompleteCheckpoint) {
  for (const std::string phase : {"model", "optimizer", "meta", "publish", "pointer", "prune"}) {
    SCOPED_TRACE(phase);
    const fs::path dir = fresh_dir("ckpt_kill_" + phase);
    ParamStore store;
    make_store(store);
    Tensor m = Tensor::zeros({store.size()});
    { CheckpointManager(dir, 1).save(1, store, {{"m", &m}}, {{"step", 1}}); }
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::setenv("KILN_TEST_KILL_IN_SAVE", ("2:" + phase).c_str(), 1);
      store.host_values()[0] = 5.0f;
      CheckpointManager(dir, 1).save(2, store, {{"m", &m}}, {{"step", 2}});  // keeps 1: prunes step 1
      ::_exit(0);  // not reached
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    const int64_t expected = phase == "pointer" || phase == "prune" ? 2 : 1;
    ASSERT_EQ(*latest_checkpoint(dir), dir / fmt::format("iter_{:07d}", expected));
    ParamStore restored;
    make_store(restored);
    Tensor m2 = Tensor::zeros({restored.size()});
    load_checkpoint(*latest_checkpoint(dir), restored, {{"m", &m2}});
    EXPECT_EQ(CheckpointMeta::read(*latest_checkpoint(dir)).integer("step"), expected);
    EXPECT_EQ(restored.host_values()[0], expected == 2 ? 5.0f : store.host_values()[0]);
    EXPECT_EQ(fs::exists(dir / "iter_0000002"), phase == "publish" || phase == "pointer" || phase == "prune");
    // Pruning renamed step 1 away before deleting it: never a checkpoint's name on a partial folder.
    EXPECT_EQ(fs::exists(dir / "iter_0000001"), phase != "prune");
    CheckpointManager next(dir, 1);  // removes what the killed save left half-written or half-deleted
    EXPECT_FALSE(fs::exists(dir / "iter_0000002.tmp"));
    EXPECT_FALSE(fs::exists(dir / "iter_0000001.tmp"));
  }
}

TEST(Checkpoint, KillHookWithABadValueIsAnErrorNamingTheVariable) {
  const fs::path dir = fresh_dir("ckpt_kill_bad");
  ParamStore store;
  make_store(store);
  ::setenv("KILN_TEST_KILL_IN_SAVE", "2:halfway", 1);
  std::string message;
  try {
    CheckpointManager(dir, 1).save(1, store, {}, {{"step", 1}});
  } catch (const Error& e) {
    message = e.what();
  }
  ::unsetenv("KILN_TEST_KILL_IN_SAVE");
  EXPECT_NE(message.find("KILN_TEST_KILL_IN_SAVE: expected STEP:PHASE"), std::string::npos) << message;
  EXPECT_NE(message.find("'2:halfway'"), std::string::npos) << message;
}

TEST(Checkpoint, UnwritableDirectoryIsAnError) {
  EXPECT_THROW(CheckpointManager("/proc/kiln_cannot_write_here", 1), Error);
}

}  // namespace
}  // namespace kiln::io

namespace kiln::io {
namespace {

// Start-up cleanup removes only the temporaries a killed save of kiln's leaves, by their exact
// names; a user's folder or file that merely contains ".tmp" stays, named once.
TEST(CheckpointCleanup, RemovesOnlyKilnsOwnTemporaries) {
  const fs::path dir = fresh_dir("ckpt_cleanup");
  fs::create_directories(dir / "iter_0000003.tmp");
  fs::create_directories(dir / "my.tmp.results");
  fs::create_directories(dir / "iter_0000003.tmp.backup");
  std::ofstream(dir / "latest_checkpointed_iteration.txt.tmp.4242") << "3\n";
  std::ofstream(dir / "notes.tmp.1") << "mine\n";
  std::ofstream(dir / "my.tmp.results" / "table.csv") << "1,2\n";
  std::ostringstream console;
  { CheckpointManager manager(dir, 1, &console); }
  EXPECT_FALSE(fs::exists(dir / "iter_0000003.tmp"));
  EXPECT_FALSE(fs::exists(dir / "latest_checkpointed_iteration.txt.tmp.4242"));
  EXPECT_TRUE(fs::exists(dir / "my.tmp.results" / "table.csv"));
  EXPECT_TRUE(fs::exists(dir / "iter_0000003.tmp.backup"));
  EXPECT_TRUE(fs::exists(dir / "notes.tmp.1"));
  for (const char* kept : {"my.tmp.results", "iter_0000003.tmp.backup", "notes.tmp.1"})
    EXPECT_NE(console.str().find("note: " + (dir / kept).string() + " left alone in the checkpoint folder"),
              std::string::npos)
        << console.str();
}

// Pruning keeps the newest checkpoints of this run (meta.json "run_id") and never touches
// another run's, which is named once.
TEST(CheckpointCleanup, PruningDeletesOnlyThisRunsCheckpoints) {
  const fs::path dir = fresh_dir("ckpt_lineage");
  ParamStore store;
  make_store(store);
  {
    CheckpointManager older(dir, 5);
    older.save(500, store, {}, {{"step", 500}, {"run_id", "older"}});
  }
  std::ostringstream console;
  CheckpointManager manager(dir, 1, &console);
  manager.save(1, store, {}, {{"step", 1}, {"run_id", "mine"}});
  manager.save(2, store, {}, {{"step", 2}, {"run_id", "mine"}});
  manager.save(3, store, {}, {{"step", 3}, {"run_id", "mine"}});
  EXPECT_TRUE(fs::exists(dir / "iter_0000500"));
  EXPECT_FALSE(fs::exists(dir / "iter_0000001"));
  EXPECT_FALSE(fs::exists(dir / "iter_0000002"));
  EXPECT_TRUE(fs::exists(dir / "iter_0000003"));
  const std::string note = "note: " + (dir / "iter_0000500").string() +
                           " left alone in the checkpoint folder (another run's checkpoint: not pruned)\n";
  EXPECT_NE(console.str().find(note), std::string::npos) << console.str();
  EXPECT_EQ(console.str().find(note), console.str().rfind(note)) << "named once: " << console.str();
}

}  // namespace
}  // namespace kiln::io

namespace kiln::io {
namespace {

// What the lock file says when the folder is taken: who holds it, and from where.
std::string second_run_error(const fs::path& dir) {
  try {
    CheckpointManager second(dir, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A pid that no process has: a child that has exited and been reaped.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return long(child);
}

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

TEST(FolderLock, AHeldFolderNamesTheLiveRunOnThisHost) {
  const fs::path dir = fresh_dir("lock_live");
  CheckpointManager first(dir, 1);
  EXPECT_EQ(second_run_error(dir), dir.string() + ": in use by a live kiln run on this host (pid " +
                                       std::to_string(::getpid()) + "); use another --save directory or stop that run");
}

TEST(FolderLock, ALockFileThatIsASymbolicLinkIsNotFollowed) {
  const fs::path dir = fresh_dir("lock_symlink");
  fs::create_directories(dir);
  std::ofstream(dir / "precious.txt") << "keep me\n";
  fs::create_symlink(dir / "precious.txt", dir / ".kiln.lock");
  EXPECT_EQ(second_run_error(dir), (dir / ".kiln.lock").string() +
                                       ": is a symbolic link; kiln does not follow its lock file through one");
  EXPECT_EQ(read_file(dir / "precious.txt"), "keep me\n");
}

// Where the filesystem refuses flock (forced here with KILN_TEST_NO_FLOCK=1), the folder is held
// by creating .kiln.lock.held exclusively: the same promise, said once at start.
TEST(FolderLock, WithoutFlockAnExclusiveFileHoldsTheFolder) {
  const kiln::testing::ScopedEnv no_flock("KILN_TEST_NO_FLOCK", "1");
  const fs::path dir = fresh_dir("lock_no_flock");
  {
    std::ostringstream console;
    CheckpointManager first(dir, 1, &console);
    EXPECT_NE(console.str().find("note: " + dir.string() + " has no flock (No locks available): the folder is held by " +
                                 (dir / ".kiln.lock.held").string()),
              std::string::npos)
        << console.str();
    EXPECT_EQ(second_run_error(dir), dir.string() + ": in use by a live kiln run on this host (pid " +
                                         std::to_string(::getpid()) + "); use another --save directory or stop that run");
  }
  EXPECT_FALSE(fs::exists(dir / ".kiln.lock.held")) << "released at the end";
  // Left by a run of this host that died: taken over.
  std::ofstream(dir / ".kiln.lock.held") << "pid " << dead_pid() << " on host " << host_name() << "\n";
  EXPECT_EQ(second_run_error(dir), "");
  // Held from another host: refused, naming it.
  std::ofstream(dir / ".kiln.lock.held") << "pid 77 on host elsewhere.example\n";
  EXPECT_EQ(second_run_error(dir), dir.string() + ": in use by a kiln run on host elsewhere.example (pid 77); use "
                                                  "another --save directory or stop that run");
}

}  // namespace
}  // namespace kiln::io

namespace kiln::io {
namespace {

// Where RENAME_EXCHANGE is refused (forced with KILN_TEST_NO_RENAME_EXCHANGE=1), saving a step
// again moves the old checkpoint aside first; killed between the two renames, the old one comes
// back whole when the pointer is next read, and a finished replacement leaves nothing behind.
TEST(Checkpoint, WithoutRenameExchangeASaveOfTheSameStepKeepsTheSamePromise) {
  const kiln::testing::ScopedEnv no_exchange("KILN_TEST_NO_RENAME_EXCHANGE", "1");
  const fs::path dir = fresh_dir("ckpt_no_exchange");
  ParamStore store;
  make_store(store);
  { CheckpointManager(dir, 2).save(1, store, {}, {{"step", 1}}); }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setenv("KILN_TEST_KILL_IN_SAVE", "1:aside", 1);
    store.host_values()[0] = 7.0f;
    CheckpointManager(dir, 2).save(1, store, {}, {{"step", 1}});
    ::_exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_FALSE(fs::exists(dir / "iter_0000001"));
  EXPECT_TRUE(fs::exists(dir / "iter_0000001.replaced"));
  const fs::path copy = fresh_dir("ckpt_no_exchange_copy");
  fs::copy(dir, copy, fs::copy_options::recursive);
  { CheckpointManager next(copy, 2); }  // a manager starting on the folder moves it back
  EXPECT_TRUE(fs::exists(copy / "iter_0000001"));
  EXPECT_FALSE(fs::exists(copy / "iter_0000001.replaced"));
  ASSERT_EQ(*latest_checkpoint(dir), dir / "iter_0000001");  // and so does reading the pointer
  ParamStore restored;
  make_store(restored);
  load_checkpoint(dir / "iter_0000001", restored, {});
  EXPECT_EQ(restored.host_values()[0], store.host_values()[0]) << "the old checkpoint, whole";

  std::ostringstream console;
  store.host_values()[0] = 9.0f;
  CheckpointManager(dir, 2, &console).save(1, store, {}, {{"step", 1}});
  EXPECT_NE(console.str().find("refuses RENAME_EXCHANGE"), std::string::npos) << console.str();
  load_checkpoint(*latest_checkpoint(dir), restored, {});
  EXPECT_EQ(restored.host_values()[0], 9.0f);
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().find(".replaced"), std::string::npos) << entry.path();
}

}  // namespace
}  // namespace kiln::io
