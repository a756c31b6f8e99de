#include "kiln/train/resume.h"

#include <fmt/format.h>

#include <filesystem>
#include <ostream>

#include "kiln/core/error.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/finite_check.h"
#include "kiln/io/safetensors.h"

namespace kiln::train {
namespace fs = std::filesystem;

namespace {

nlohmann::json::json_pointer pointer(const std::string& key) {
  std::string path = "/run/" + key;
  for (char& ch : path)
    if (ch == '.') ch = '/';
  return nlohmann::json::json_pointer(path);
}

bool waived(RunSetting::Waiver w, const ResumeFlags& f) {
  switch (w) {
    case RunSetting::Waiver::none: return false;
    case RunSetting::Waiver::finetune: return f.finetune;
    case RunSetting::Waiver::no_load_rng: return f.finetune || f.no_load_rng;
    case RunSetting::Waiver::no_load_optim: return f.finetune || f.no_load_optim;
  }
  return false;
}

// Weights or optimizer state holding NaN or Inf would train on NaN from the first step; what the
// resume loads is checked before anything else happens (a missing file is load_checkpoint's error).
void check_finite_checkpoint(const fs::path& dir, bool optimizer) {
  for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
    const fs::path file = dir / name;
    if ((!optimizer && file.filename() == "optimizer.safetensors") || !fs::exists(file)) continue;
    const io::SafetensorsFile tensors = io::SafetensorsFile::open(file);
    for (const std::string& tensor : tensors.names()) io::check_finite(tensors.get(tensor), file.string(), tensor);
  }
}

std::string remedy(RunSetting::Waiver w) {
  switch (w) {
    case RunSetting::Waiver::none: return "; a resumed run needs the same model";
    case RunSetting::Waiver::finetune: return " (--finetune loads only the weights and starts at step 0)";
    case RunSetting::Waiver::no_load_rng:
      return " (--no-load-rng continues with this run's seed; --finetune loads only the weights)";
    case RunSetting::Waiver::no_load_optim:
      return " (--no-load-optim starts a fresh optimizer; --finetune loads only the weights)";
  }
  return "";
}

}  // namespace

void add_run_settings(nlohmann::json& meta, const RunSettings& settings) {
  for (const RunSetting& s : settings) meta[pointer(s.key)] = s.value;
}

ResumePoint find_resume_point(const std::string& load_dir, const ResumeFlags& flags, const RunSettings& settings,
                              std::ostream& console) {
  ResumePoint point;
  point.flags = flags;
  if (load_dir.empty()) return point;
  if (!fs::exists(load_dir)) {
    console << fmt::format("warning: --load {} does not exist: training from scratch\n", load_dir);
    return point;
  }
  const std::optional<fs::path> latest = io::latest_checkpoint(load_dir);
  if (!latest) {
    console << fmt::format(
        "warning: --load {} holds no checkpoint (no latest_checkpointed_iteration.txt): training from scratch\n",
        load_dir);
    return point;
  }
  io::CheckpointMeta meta = io::CheckpointMeta::read(*latest);
  for (const RunSetting& s : settings) {
    const nlohmann::json& saved = meta.at("run." + s.key);
    if (saved == s.value || waived(s.waiver, flags)) continue;
    throw Error("{}: {} is {} in the checkpoint, {} in this run{}", meta.file().string(), s.key, saved.dump(),
                s.value.dump(), remedy(s.waiver));
  }
  point.checkpoint = std::move(meta);
  if (!flags.allow_non_finite) check_finite_checkpoint(point.checkpoint->dir(), point.loads_optimizer());
  return point;
}

}  // namespace kiln::train
