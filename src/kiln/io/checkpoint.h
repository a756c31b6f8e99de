// io/checkpoint.h — training checkpoints, in Megatron-LM's directory layout (so Megatron users'
// scripts that read `latest_checkpointed_iteration.txt` keep working) with kiln's files inside:
//   DIR/iter_0001000/model.safetensors      every parameter (and model buffer) by name, fp32
//   DIR/iter_0001000/optimizer.safetensors  "<state>.<param>" slices of each optimizer buffer
//   DIR/iter_0001000/meta.json              step, data position, settings, MLPerf log position,
//                                           format (io/checkpoint_meta.h), each tensor file's size
//                                           and CRC-32 (io/checkpoint_contents.h)
//   DIR/latest_checkpointed_iteration.txt   the newest complete iteration, written last
// A checkpoint directory is assembled under a temporary name, fsynced and renamed when complete
// (swapped atomically when the step exists), the folder fsynced, then the pointer written: a
// crash at any instant leaves the pointer naming a complete checkpoint; a folder with a
// checkpoint's name is always complete (old ones are renamed to temporaries before deletion).
// Where the filesystem refuses the swap (RENAME_EXCHANGE: NFS, CephFS, Lustre clients), the step
// being saved again moves aside to iter_N.replaced first; a crash between the two renames leaves
// it whole there, and latest_checkpoint moves it back before anything reads the pointer's step.
// One run at a time owns the folder (io/folder_lock.h).
//
// KILN_TEST_KILL_IN_SAVE=STEP:PHASE (test hook, the kill drills): the save of checkpoint STEP
// kills its own process (SIGKILL) right after PHASE: model, optimizer, meta (files written, the
// folder still a temporary), aside (the swap's fallback: the old checkpoint moved aside, the new
// one not yet in place), publish (moved into place, the pointer not yet updated), pointer
// (before pruning) or prune (old checkpoints renamed for deletion, not yet deleted; only when
// there is one to prune).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kiln/io/folder_lock.h"
#include "kiln/nn/params.h"

namespace kiln::io {

// A flat optimizer buffer with the ParamStore's layout (e.g. LAMB's "exp_avg").
using FlatState = std::pair<std::string, Tensor*>;
// Host f32 tensors by name, as a checkpoint file holds them.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class CheckpointManager {
 public:
  // Creates `dir`, takes its lock (throws naming the other run's pid and host when another
  // kiln holds it) and removes the temporaries a killed save of kiln's leaves, by their exact
  // names (iter_<digits>.tmp/, latest_checkpointed_iteration.txt.tmp.<pid>). Anything else in
  // `dir` is left alone, and named once on `console` (when given) if it looks like a temporary.
  CheckpointManager(std::filesystem::path dir, int64_t keep, std::ostream* console = nullptr);

  // Writes checkpoint `step`, updates the pointer file, deletes all but the newest `keep` of this
  // run's checkpoints (never the one the pointer names). This run's: those whose meta.json has
  // the "run_id" of `meta` (or, when `meta` has none, none either); other runs' iter_* folders are
  // left and named once on `console`. On an error (disk full, unwritable) the previous checkpoint
  // and pointer are untouched.
  // `buffers` (e.g. BatchNorm running statistics) go into model.safetensors as 1-D tensors;
  // meta.json is `meta` with "format": kCheckpointFormat added.
  std::filesystem::path save(int64_t step, const ParamStore& params,
                             const std::vector<FlatState>& optimizer, const nlohmann::json& meta,
                             const std::vector<FlatState>& buffers = {});

  // The same, from whole tensors already named: `model` for model.safetensors, `optimizer` for
  // optimizer.safetensors ("<state>.<parameter>"); the parts of a model-parallel run gathered.
  std::filesystem::path save(int64_t step, const NamedTensors& model, const NamedTensors& optimizer,
                             const nlohmann::json& meta);

  std::optional<std::filesystem::path> latest() const;

 private:
  void publish(const std::filesystem::path& tmp_dir, const std::filesystem::path& final_dir, int64_t step);
  void publish_by_moving_aside(const std::filesystem::path& tmp_dir, const std::filesystem::path& final_dir,
                               int64_t step);
  void prune(const std::filesystem::path& current, int64_t step, const nlohmann::json& run_id);
  void remove_stale_temporaries();

  void say_left_alone(const std::filesystem::path& entry, const std::string& why);

  std::filesystem::path dir_;
  int64_t keep_;
  std::ostream* console_;
  std::set<std::filesystem::path> named_;  // entries already said to be left alone
  bool said_no_exchange_ = false;
  FolderLock lock_;
};

// The newest complete checkpoint in `dir`, if any (none when `dir` does not exist); throws if
// the pointer file names a missing one.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

// Restores parameters, model buffers and the `optimizer` buffers given (none: the optimizer is
// not loaded). Every one must be present with the right shape, else kiln::Error naming the
// tensor. Checkpoints hold whole parameters: a tensor-parallel part (ParamSpec::part_dim) takes
// its slice, so a checkpoint loads under any layout. meta.json is read by CheckpointMeta::read (io/checkpoint_meta.h).
void load_checkpoint(const std::filesystem::path& checkpoint, ParamStore& params,
                     const std::vector<FlatState>& optimizer, const std::vector<FlatState>& buffers = {});

// Writes just the model parameters (for export / evaluation).
void save_model(const std::filesystem::path& file, const ParamStore& params);

}  // namespace kiln::io
