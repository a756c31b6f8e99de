// train/resume.h — where a run starts: from scratch, or from the newest checkpoint in --load.
//
// Each checkpoint records, under "run" in meta.json, the settings the run's math depends on
// (RunSetting: the model's shape, the sequence length, the global batch, the seed, the
// optimizer). Resuming with a different value is refused in one line naming the key and both
// values, unless a flag of train/config/resume_flags.h waives that setting:
//   model shape                          never (the weights would mean something else)
//   sequence length / image size, batch  --finetune
//   seed                                 --no-load-rng or --finetune
//   optimizer                            --no-load-optim or --finetune
// A checkpoint of another format is always refused (io/checkpoint_meta.h), and one whose weights
// (or, when the optimizer is loaded, optimizer state) hold NaN or Inf unless --allow-non-finite
// (io/finite_check.h), and one whose tensor files differ from the sizes and CRC-32s its meta.json
// records (io/checkpoint_contents.h). A --load folder that does not exist, or holds no checkpoint,
// is a warning and a run from scratch (as Megatron), when every rank sees it so.
#pragma once
#include <nlohmann/json.hpp>

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "kiln/dist/world.h"
#include "kiln/io/checkpoint_meta.h"
#include "kiln/train/config/resume_flags.h"

namespace kiln::train {

struct RunSetting {
  enum class Waiver { none, finetune, no_load_rng, no_load_optim };  // each but none also by --finetune
  std::string key;        // the config key, e.g. "model.hidden_size"; meta.json "run.<key>"
  nlohmann::json value;
  Waiver waiver = Waiver::none;
};
using RunSettings = std::vector<RunSetting>;

// Writes `settings` under meta["run"] (nested by the keys' dots).
void add_run_settings(nlohmann::json& meta, const RunSettings& settings);

struct ResumePoint {
  std::optional<io::CheckpointMeta> checkpoint;  // nullopt: from scratch
  ResumeFlags flags;

  // The run continues (not --finetune): its step, data position and MLPerf log go on.
  bool continues_run() const { return checkpoint && !flags.finetune; }
  bool loads_optimizer() const { return continues_run() && !flags.no_load_optim; }
};

// The newest checkpoint in `load_dir` (empty: none wanted), checked against `settings` as the
// header says; warnings go to `console`. One decision for all of `ranks`: each rank reports what
// it finds (the folder, the step, each tensor file's size and CRC-32) and all must equal rank 0's,
// else every rank throws naming the first rank that differs and both views. Throws kiln::Error on
// a mismatch, a bad meta.json, or tensor files whose contents differ from what meta.json records.
ResumePoint find_resume_point(const std::string& load_dir, const ResumeFlags& flags, const RunSettings& settings,
                              std::ostream& console, dist::Communicator& ranks = dist::world());

}  // namespace kiln::train
