// train/sinks.h — where a run writes: the console, the MLPerf log, TensorBoard and checkpoints.
// Every sink is open on rank 0 only: elsewhere the console discards what it is given and the
// others do not exist.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "kiln/io/checkpoint.h"
#include "kiln/log/mllog.h"
#include "kiln/log/tensorboard.h"
#include "kiln/train/resume.h"

namespace kiln::train {

class Sinks {
 public:
  // `tensorboard_dir` empty: no TensorBoard; `save_dir` empty: no checkpoints, else its lock is
  // taken here, before the MLPerf log is touched, so a second run on the same folders stops
  // before it changes the first one's log.
  Sinks(bool is_rank0, std::ostream& console, const std::string& tensorboard_dir, const std::string& save_dir,
        int64_t keep_checkpoints);
  ~Sinks();

  // Opens the MLPerf log and returns its path. When `resume` continues a run: the log that run
  // wrote (meta.json "mllog.file", in `output_dir`), cut back to its length when the checkpoint
  // was saved; a fresh run (or --finetune): `fresh_name` in `output_dir`, created new, replacing
  // any file of that name; `after_init_phase` (the run phase of a two-process run): `fresh_name`
  // as the init phase left it, appended to. Throws kiln::Error naming the checkpoint when its log
  // cannot be continued (missing, shorter, or not the same bytes), or naming the log when no
  // finished init phase wrote it.
  std::filesystem::path open_mllog(const std::filesystem::path& output_dir, const std::string& fresh_name,
                                   const ResumePoint& resume, bool after_init_phase = false);

  bool is_rank0() const { return rank0_; }
  std::ostream& console() { return *console_; }
  log::MlLogger* mllog() { return mllog_ ? &*mllog_ : nullptr; }
  log::TensorBoardWriter* tensorboard() { return tensorboard_ ? &*tensorboard_ : nullptr; }
  io::CheckpointManager* checkpoints() { return checkpoints_ ? &*checkpoints_ : nullptr; }
  // The run saves checkpoints (on every rank: the ones that send their parts to rank 0 too).
  bool saves_checkpoints() const { return saves_checkpoints_; }

 private:
  bool rank0_;
  bool saves_checkpoints_;
  std::unique_ptr<std::ostream> null_;
  std::ostream* console_;
  std::optional<log::MlLogger> mllog_;
  std::optional<log::TensorBoardWriter> tensorboard_;
  std::optional<io::CheckpointManager> checkpoints_;
};

}  // namespace kiln::train
