// Kill drills: `kiln train bert` and `kiln train resnet` killed with SIGKILL again and again —
// at random moments, and inside checkpoint saves at every phase (KILN_TEST_KILL_IN_SAVE) — and
// resumed from the same folders each time, until the run reaches its target. Then the final
// weights and optimizer state are bitwise those of an uninterrupted run, so is every step's loss
// (KILN_TEST_LOSS_LOG; a step run twice, before a kill and after the resume, gave the same loss
// both times), the MLPerf log has the uninterrupted run's events and passes the official
// checker, and after every kill every checkpoint on disk was complete and readable.
// Resumes land inside a data epoch and run across an epoch boundary, for both models.
//
// KILN_DRILL_KILLS=N (default 3 per model) sets the number of kills; a run that reaches its
// target before then starts a new cycle from scratch. KILN_DRILL_SEED fixes the random choices
// (printed). scripts/drills.sh N runs the long version.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/checkpoint_meta.h"
#include "kiln/io/safetensors.h"
#include "tests/testing/config_flags.h"
#include "tests/testing/exact_losses.h"
#include "tests/testing/mllog_events.h"
#include "tests/testing/mlperf_checker.h"
#include "tests/testing/temp_dir.h"
#include "tests/train/tiny_runs.h"

extern char** environ;

namespace kiln::train {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::stoll(v) : fallback;
}

struct Exit {
  bool killed = false;  // by our SIGKILL, or by the save hook's
  int status = 0;       // exit status otherwise
};

// Runs `kiln train MODEL ARGS` with `env` added, stdout and stderr appended to `output`; kills it with
// SIGKILL after `kill_after` seconds if it is still running then.
Exit run_kiln(const std::string& model, const std::vector<std::string>& args, const std::vector<std::string>& env, const fs::path& output,
              std::optional<double> kill_after) {
  std::vector<std::string> words = {KILN_BINARY, "train", model};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_words = env;
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  for (auto& e : env_words) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error("posix_spawn {}: {}", words[0], std::strerror(rc));
  const auto start = Clock::now();
  const double limit = kill_after.value_or(300.0);  // a run that hangs fails the drill
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::duration<double>(Clock::now() - start).count() >= limit) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      if (!kill_after) throw Error("kiln train did not finish within {} s; see {}", limit, output.string());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return {true, 0};
  return {false, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
}

// Every checkpoint folder on disk is complete: meta.json of this format with the keys a resume
// reads, both safetensors files with every tensor readable; the pointer names one of them.
void expect_every_checkpoint_readable(const fs::path& ckpt, const std::string& when) {
  SCOPED_TRACE(when);
  if (!fs::exists(ckpt)) return;
  EXPECT_NO_THROW(io::latest_checkpoint(ckpt));
  const std::regex complete("iter_([0-9]{7})");
  for (const auto& entry : fs::directory_iterator(ckpt)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, complete)) continue;
    try {
      const io::CheckpointMeta meta = io::CheckpointMeta::read(entry.path());
      EXPECT_EQ(meta.integer("step"), std::stoll(m[1])) << name;
      meta.integer("optimizer_steps");
      meta.integer("mllog.bytes");
      for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        const io::SafetensorsFile tensors = io::SafetensorsFile::open(entry.path() / file);
        for (const auto& tensor : tensors.names()) tensors.get(tensor);
      }
    } catch (const Error& e) {
      ADD_FAILURE() << "unreadable checkpoint " << entry.path() << ": " << e.what();
    }
  }
}

int64_t latest_step(const fs::path& ckpt) {
  const auto latest = fs::exists(ckpt) ? io::latest_checkpoint(ckpt) : std::nullopt;
  return latest ? io::CheckpointMeta::read(*latest).integer("step") : 0;
}

// One model's drill (`name`: the kiln train command). `epoch_of(step)`: the data epochs done after `step` (fractional inside an
// epoch); `first_flags`, `first_env`: of each cycle's first run, chosen so that the next resume
// lands inside an epoch and runs across its end.
struct Drill {
  std::string name, ruleset, log_name;
  std::vector<std::string> flags;
  int64_t save_interval;  // in steps
  std::function<double(int64_t)> epoch_of;
  std::vector<std::string> first_flags, first_env;
};

void run_drill(const Drill& d) {
  const fs::path root = testing::unique_temp_dir("drill_" + d.name);
  const int64_t kills_wanted = env_int("KILN_DRILL_KILLS", 3);
  const uint64_t seed = uint64_t(env_int("KILN_DRILL_SEED", int64_t(std::random_device{}() & 0x7fffffff)));
  std::mt19937_64 rng(seed);
  std::cout << "[ drill    ] " << d.name << ": seed " << seed << " (KILN_DRILL_SEED), " << kills_wanted
            << " kills (KILN_DRILL_KILLS)\n";
  // Two checkpoints kept: every save also prunes, so kills land inside deletions too.
  auto args = [&](const fs::path& dir, const std::vector<std::string>& extra) {
    return testing::with_flags(testing::with_flags(d.flags, {"--output-dir", dir.string(), "--save", (dir / "ckpt").string(),
                                                             "--load", (dir / "ckpt").string(), "--keep-checkpoints", "2"}),
                               extra);
  };

  // The uninterrupted run.
  const fs::path ref = root / "reference";
  const auto t0 = Clock::now();
  const Exit ref_exit = run_kiln(d.name, args(ref, {}), {"KILN_TEST_LOSS_LOG=" + (ref / "losses.txt").string()},
                                 root / "reference.out", std::nullopt);
  const double ref_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(ref_exit.status, 0) << read_file(root / "reference.out");
  const std::map<int64_t, std::string> ref_losses = testing::read_exact_losses(ref / "losses.txt");
  const int64_t final_step = latest_step(ref / "ckpt");
  ASSERT_EQ(int64_t(ref_losses.size()), final_step);
  const fs::path ref_final = ref / "ckpt" / fmt::format("iter_{:07d}", final_step);

  int64_t kills = 0, in_save = 0, timed = 0;
  for (int cycle = 0; kills < kills_wanted; ++cycle) {
    const fs::path dir = root / fmt::format("cycle{}", cycle);
    std::vector<std::map<int64_t, std::string>> segments;
    for (int round = 0;; ++round) {
      const std::string tag = fmt::format("cycle {} round {}", cycle, round);
      const fs::path losses = dir / fmt::format("losses{}.txt", round);
      std::vector<std::string> extra, env = {"KILN_TEST_LOSS_LOG=" + losses.string()};
      std::optional<double> kill_after;
      if (kills < kills_wanted) {
        if (round == 0) {
          extra = d.first_flags;
          env.insert(env.end(), d.first_env.begin(), d.first_env.end());
        } else if (round % 2 == 1) {  // inside a save, at a random phase, of one of the next saves
          const int64_t from = latest_step(dir / "ckpt") / d.save_interval + 1;
          const int64_t to = std::min(from + 3, final_step / d.save_interval);
          if (from <= to) {
            const int64_t step = d.save_interval * std::uniform_int_distribution<int64_t>(from, to)(rng);
            const char* phases[] = {"model", "optimizer", "meta", "publish", "pointer", "prune"};
            env.push_back(fmt::format("KILN_TEST_KILL_IN_SAVE={}:{}", step, phases[rng() % 6]));
          }
        } else {  // at a random moment of what the rest of the run should take (startup about a fifth)
          const double left = double(final_step - latest_step(dir / "ckpt")) / double(final_step);
          kill_after = std::uniform_real_distribution<double>(0.0, ref_seconds * (0.2 + 0.8 * left))(rng);
        }
      }
      const Exit e = run_kiln(d.name, args(dir, extra), env, dir.string() + ".out", kill_after);
      segments.push_back(testing::read_exact_losses(losses));
      if (e.killed) {
        ++kills;
        (kill_after ? timed : in_save) += 1;
        expect_every_checkpoint_readable(dir / "ckpt", tag);
        continue;
      }
      ASSERT_EQ(e.status, 0) << tag << "\n" << read_file(dir.string() + ".out");
      if (!extra.empty()) continue;  // stopped where the first run was told to
      ASSERT_EQ(latest_step(dir / "ckpt"), final_step) << tag << "\n" << read_file(dir.string() + ".out");
      break;  // reached the target
    }
    SCOPED_TRACE(fmt::format("cycle {}", cycle));
    // Losses: every step the same each time it ran, the last run of each step the reference's.
    std::map<int64_t, std::string> final_losses;
    bool inside_epoch = false, across_epochs = false;
    for (size_t s = 0; s < segments.size(); ++s) {
      for (const auto& [step, loss] : segments[s]) {
        if (final_losses.count(step)) {
          EXPECT_EQ(final_losses[step], loss) << "step " << step << " ran again";
        }
        final_losses[step] = loss;
      }
      if (s == 0 || segments[s].empty()) continue;
      const int64_t first = segments[s].begin()->first - 1, last = segments[s].rbegin()->first;
      if (first == 0) continue;  // started from scratch
      inside_epoch |= d.epoch_of(first) != std::floor(d.epoch_of(first));
      across_epochs |= std::floor(d.epoch_of(first)) < std::floor(d.epoch_of(last));
    }
    EXPECT_EQ(final_losses, ref_losses);
    EXPECT_TRUE(inside_epoch) << "no resume landed inside an epoch";
    EXPECT_TRUE(across_epochs) << "no resumed run crossed an epoch boundary";
    // Weights and optimizer state.
    const fs::path final_dir = dir / "ckpt" / fmt::format("iter_{:07d}", final_step);
    for (const char* file : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(read_file(final_dir / file), read_file(ref_final / file)) << file << " differs";
    // The MLPerf log.
    const std::vector<std::string> events = testing::mllog_events(dir / d.log_name);
    EXPECT_EQ(events, testing::mllog_events(ref / d.log_name));
    EXPECT_EQ(testing::count_key(events, "run_start"), 1);
    testing::expect_compliant_where_checker_installed(dir / d.log_name, d.ruleset);
    std::cout << "[ drill    ] " << d.name << " cycle " << cycle << ": " << segments.size() << " runs, "
              << final_step << " steps, identical to the uninterrupted run\n";
  }
  std::cout << "[ drill    ] " << d.name << ": " << kills << " kills (" << in_save << " inside saves, " << timed
            << " at random moments), all resumed bitwise\n";
}

TEST(KillDrill, BertKilledAndResumedEndsBitwiseAsAnUninterruptedRun) {
  const testing::TinyBert data = testing::tiny_bert(testing::unique_temp_dir("drill_bert_data"));
  const int64_t batch = 8, save_interval = 3;
  // Samples per epoch are not a multiple of the batch: epochs end inside steps. The first run is
  // killed inside the first save after the first epoch ends, so the next one resumes before it.
  const int64_t boundary_save = (data.train_samples / batch / save_interval + 1) * save_interval;
  run_drill({"bert", "5.0.0", "result_bert_7.log",
             testing::with_flags(data.flags, {"--save-interval", std::to_string(save_interval)}), save_interval,
             [&](int64_t step) { return double(step * batch) / double(data.train_samples); },
             {},
             {fmt::format("KILN_TEST_KILL_IN_SAVE={}:publish", boundary_save)}});
}

TEST(KillDrill, ResNetKilledAndResumedEndsBitwiseAsAnUninterruptedRun) {
  const testing::TinyResNet data = testing::tiny_resnet(testing::unique_temp_dir("drill_resnet_data"));
  const int64_t epoch = data.steps_per_epoch;
  // Checkpoints at every epoch's end, and where a run stops: the first run stops inside epoch 2,
  // so the next one resumes there and runs across the end of the epoch.
  run_drill({"resnet", "4.0.0", "result_resnet_3.log", data.flags, epoch,
             [&](int64_t step) { return double(step) / double(epoch); },
             {"--exit-interval", std::to_string(epoch + epoch / 2)},
             {}});
}

}  // namespace
}  // namespace kiln::train
