#include "kiln/train/sinks.h"

#include <ostream>
#include <streambuf>

#include "kiln/core/error.h"
#include "kiln/log/submission.h"

namespace kiln::train {
namespace fs = std::filesystem;

namespace {

// Discards everything (the console of ranks other than 0).
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c == EOF ? 0 : c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

struct NullStream : std::ostream {
  NullStream() : std::ostream(&buffer) {}
  NullBuffer buffer;
};

}  // namespace

Sinks::Sinks(bool is_rank0, std::ostream& console, const std::string& tensorboard_dir, const std::string& save_dir,
             int64_t keep_checkpoints)
    : rank0_(is_rank0), saves_checkpoints_(!save_dir.empty()) {
  if (rank0_) {
    console_ = &console;
    if (!tensorboard_dir.empty()) tensorboard_.emplace(tensorboard_dir);
    if (!save_dir.empty()) checkpoints_.emplace(save_dir, keep_checkpoints, &console);
  } else {
    null_ = std::make_unique<NullStream>();
    console_ = null_.get();
  }
}

Sinks::~Sinks() = default;

fs::path Sinks::open_mllog(const fs::path& output_dir, const std::string& fresh_name, const ResumePoint& resume,
                           bool after_init_phase) {
  if (!resume.continues_run()) {
    const fs::path path = output_dir / fresh_name;
    if (!rank0_) return path;
    if (after_init_phase) {
      log::check_init_phase_log(path);
      mllog_.emplace(path, false, log::mllog_end(path));
    } else {
      mllog_.emplace(path, false);
    }
    return path;
  }
  const io::CheckpointMeta& meta = *resume.checkpoint;
  const fs::path path = output_dir / fs::path(meta.string("mllog.file")).filename();
  if (!rank0_) return path;
  const log::MlLogPosition at{uint64_t(meta.integer("mllog.bytes")), uint32_t(meta.integer("mllog.crc32c"))};
  try {
    mllog_.emplace(path, false, at);
  } catch (const Error& e) {
    throw Error("checkpoint {}: cannot continue its run's MLPerf log: {}; resume with that run's --output-dir "
                "and log, or use --finetune to start a new run",
                meta.dir().string(), e.what());
  }
  return path;
}

}  // namespace kiln::train
