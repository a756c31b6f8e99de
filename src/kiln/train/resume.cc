#include "kiln/train/resume.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/dist/communicator.h"
#include "kiln/io/checkpoint.h"
#include "kiln/io/checkpoint_contents.h"
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

// What one rank finds in --load: `text` is what all ranks must agree on (the checkpoint's folder,
// step and the contents its files hold); `error`, why it cannot resume from it.
struct LoadView {
  std::string text, warning, error;
  std::optional<io::CheckpointMeta> meta;
};

LoadView look_into(const std::string& load_dir) {
  LoadView v;
  if (load_dir.empty()) {
    v.text = "no --load";
  } else if (!fs::exists(load_dir)) {
    v.text = fmt::format("--load {} does not exist", load_dir);
    v.warning = fmt::format("warning: --load {} does not exist: training from scratch\n", load_dir);
  } else if (const std::optional<fs::path> latest = io::latest_checkpoint(load_dir); !latest) {
    v.text = fmt::format("--load {} holds no checkpoint", load_dir);
    v.warning = fmt::format(
        "warning: --load {} holds no checkpoint (no latest_checkpointed_iteration.txt): training from scratch\n",
        load_dir);
  } else {
    v.meta = io::CheckpointMeta::read(*latest);
    const nlohmann::json actual = io::checkpoint_contents(*latest);
    // The folder's name, not its path: node-local copies may sit at different paths.
    v.text = fmt::format("checkpoint {} at step {} ({})", latest->filename().string(), v.meta->integer("step"),
                         io::describe_contents(actual));
    // Checkpoints saved before meta.json recorded "contents" are taken as they are.
    const std::string damage =
        v.meta->contains("contents") ? io::contents_difference(v.meta->at("contents"), actual) : "";
    if (!damage.empty())
      v.error = fmt::format("{}: {}: the checkpoint is damaged; resume from another one", latest->string(), damage);
  }
  return v;
}

// A rank that cannot read its --load still takes part in the agreement, saying why.
LoadView look_into_or_say_why(const std::string& load_dir) {
  try {
    return look_into(load_dir);
  } catch (const Error& e) {
    LoadView v;
    v.text = v.error = e.what();
    return v;
  }
}

// Rank 0 decides where the run resumes; every rank must see the same, or every rank stops with
// the same message naming the first rank that differs.
void agree_across_ranks(dist::Communicator& ranks, const std::string& view) {
  if (ranks.size() == 1) return;
  const std::vector<std::string> views = dist::all_gather_strings(ranks, view);
  for (size_t r = 1; r < views.size(); ++r)
    if (views[r] != views[0])
      throw Error("resume: rank {} sees {}, but rank 0 sees {}: every rank must resume from the same checkpoint "
                  "(one --load folder that all ranks see, or identical copies)", r, views[r], views[0]);
}

}  // namespace

void add_run_settings(nlohmann::json& meta, const RunSettings& settings) {
  for (const RunSetting& s : settings) meta[pointer(s.key)] = s.value;
}

ResumePoint find_resume_point(const std::string& load_dir, const ResumeFlags& flags, const RunSettings& settings,
                              std::ostream& console, dist::Communicator& ranks) {
  ResumePoint point;
  point.flags = flags;
  LoadView view = look_into_or_say_why(load_dir);
  agree_across_ranks(ranks, view.text);
  if (!view.error.empty()) throw Error("{}", view.error);
  if (!view.warning.empty()) console << view.warning;
  if (!view.meta) return point;
  io::CheckpointMeta& meta = *view.meta;
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
