#include "kiln/io/checkpoint.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <stdio.h>

#include <csignal>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"
#include "kiln/io/checkpoint_contents.h"
#include "kiln/io/checkpoint_meta.h"
#include "kiln/io/param_parts.h"
#include "kiln/io/safetensors.h"

namespace kiln::io {
namespace fs = std::filesystem;

namespace {

// Checkpoints read and write host memory; a run on a device stages through io/host_staging.h.
void expect_host(const Tensor& t, const std::string& what) {
  KILN_CHECK(t.device.is_cpu(), "checkpoint: {} is on {}, not on the host", what, t.device.str());
}

NamedTensors param_tensors(const ParamStore& params, const Tensor& buffer, const std::string& prefix) {
  expect_host(buffer, prefix.empty() ? "the weights" : prefix);
  NamedTensors out;
  for (const ParamSpec& s : params.specs()) {
    KILN_CHECK(s.part_dim < 0, "checkpoint: parameter '{}' is a tensor-parallel part; gather the whole first", s.name);
    out.emplace_back(prefix + s.name,
                     Tensor::view(const_cast<float*>(buffer.ptr<float>()) + s.offset, s.shape));
  }
  return out;
}

void restore(const SafetensorsFile& file, const fs::path& path, const ParamStore& params,
             Tensor& buffer, const std::string& prefix) {
  expect_host(buffer, prefix.empty() ? "the weights" : prefix);
  for (const ParamSpec& s : params.specs()) {
    const std::string name = prefix + s.name;
    if (!file.contains(name)) throw Error("{}: tensor '{}' is missing", path.string(), name);
    Tensor t = file.get(name);
    if (t.dtype != DType::f32 || t.shape != s.full_shape)
      throw Error("{}: tensor '{}' has shape {} {}, expected {} f32", path.string(), name,
                  shape_str(t.shape), dtype_name(t.dtype), shape_str(s.full_shape));
    extract_part(s, t.ptr<float>(), buffer.ptr<float>() + s.offset);
  }
}

NamedTensors buffer_tensors(const std::vector<FlatState>& buffers) {
  NamedTensors out;
  for (auto& [name, buffer] : buffers) {
    expect_host(*buffer, name);
    out.emplace_back(name, *buffer);
  }
  return out;
}

void restore_buffers(const SafetensorsFile& file, const fs::path& path,
                     const std::vector<FlatState>& buffers) {
  for (auto& [name, buffer] : buffers) {
    expect_host(*buffer, name);
    if (!file.contains(name)) throw Error("{}: tensor '{}' is missing", path.string(), name);
    Tensor t = file.get(name);
    if (t.dtype != DType::f32 || t.numel() != buffer->numel())
      throw Error("{}: tensor '{}' has shape {} {}, expected ({}) f32", path.string(), name,
                  shape_str(t.shape), dtype_name(t.dtype), buffer->numel());
    std::copy_n(t.ptr<float>(), buffer->numel(), buffer->ptr<float>());
  }
}

std::string step_name(int64_t step) { return fmt::format("iter_{:07d}", step); }

constexpr const char* kPointerFile = "latest_checkpointed_iteration.txt";

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A checkpoint folder's name: iter_ and at least 7 digits (step_name).
bool is_step_name(std::string_view name) { return name.starts_with("iter_") && all_digits(name.substr(5)); }

// The leftovers of a save that was killed, by kiln's own names: a checkpoint being assembled or
// being deleted (iter_<digits>.tmp) and the pointer file being written (kPointerFile.tmp.<pid>).
bool is_own_temporary(const std::filesystem::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  if (entry.is_directory() && name.ends_with(".tmp")) return is_step_name(name.substr(0, name.size() - 4));
  const std::string pointer_tmp = std::string(kPointerFile) + ".tmp.";
  return entry.is_regular_file() && name.starts_with(pointer_tmp) && all_digits(name.substr(pointer_tmp.size()));
}

// Where a checkpoint being replaced waits while its successor moves in (publish_by_moving_aside).
constexpr std::string_view kReplaced = ".replaced";
fs::path replaced_name(const fs::path& checkpoint) { return checkpoint.string() + std::string(kReplaced); }

// A replacement killed between its two renames leaves iter_N.replaced: the old checkpoint, whole,
// moved back when iter_N is missing; a leftover, removed, when iter_N is in place.
void settle_replaced(const fs::path& checkpoint) {
  const fs::path aside = replaced_name(checkpoint);
  std::error_code ec;
  if (!fs::is_directory(aside, ec)) return;
  if (fs::is_directory(checkpoint, ec)) fs::remove_all(aside, ec);
  else fs::rename(aside, checkpoint, ec);  // another rank may have done it first
}

// The renameat2 errors that mean "this filesystem cannot exchange", not "this exchange failed".
bool exchange_unsupported(int e) { return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP; }

// KILN_TEST_NO_RENAME_EXCHANGE=1 (test hook): renameat2 refuses RENAME_EXCHANGE, as over NFS.
bool exchange_refused_for_test() {
  const char* v = std::getenv("KILN_TEST_NO_RENAME_EXCHANGE");
  return v && std::string_view(v) == "1";
}

// The run a checkpoint folder belongs to ("run_id" in its meta.json; null without one). A folder
// whose meta.json cannot be read is nobody's: it is never pruned.
std::optional<nlohmann::json> run_of(const fs::path& checkpoint) {
  try {
    const nlohmann::json meta = nlohmann::json::parse(read_file(checkpoint / "meta.json"));
    return meta.contains("run_id") ? meta.at("run_id") : nlohmann::json();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The test hook of the header: KILN_TEST_KILL_IN_SAVE=STEP:PHASE (read at every call, so a forked
// test child can set it).
void test_kill_point(int64_t step, std::string_view phase) {
  const char* v = std::getenv("KILN_TEST_KILL_IN_SAVE");
  if (!v || !*v) return;
  const std::string spec = v;
  const size_t colon = spec.find(':');
  const std::string p = colon == std::string::npos ? "" : spec.substr(colon + 1);
  char* end = nullptr;
  const long long s = std::strtoll(spec.c_str(), &end, 10);
  if (colon == std::string::npos || end != spec.c_str() + colon || s < 0 ||
      (p != "model" && p != "optimizer" && p != "meta" && p != "aside" && p != "publish" && p != "pointer" &&
       p != "prune"))
    throw Error("environment variable KILN_TEST_KILL_IN_SAVE: expected STEP:PHASE with PHASE model, optimizer, "
                "meta, aside, publish, pointer or prune, got '{}'", spec);
  if (s == step && p == phase) std::raise(SIGKILL);
}

// The files of checkpoint `step` in its temporary folder, each fsynced by write_file_atomic, the
// folder's entries by fsync_path.
void write_unpublished(int64_t step, const fs::path& tmp_dir, const NamedTensors& model, const NamedTensors& state,
                       const nlohmann::json& meta) {
  save_safetensors(tmp_dir / "model.safetensors", model);
  test_kill_point(step, "model");
  save_safetensors(tmp_dir / "optimizer.safetensors", state);
  test_kill_point(step, "optimizer");
  nlohmann::json with_format = meta;
  with_format["format"] = kCheckpointFormat;
  with_format["contents"] = checkpoint_contents(tmp_dir);
  write_file_atomic(tmp_dir / "meta.json", [&](std::ostream& out) { out << with_format.dump(2) << "\n"; });
  fsync_path(tmp_dir);
  test_kill_point(step, "meta");
}

}  // namespace

CheckpointManager::CheckpointManager(fs::path dir, int64_t keep, std::ostream* console)
    : dir_(std::move(dir)), keep_(keep), console_(console), lock_(dir_) {
  if (console_ && !lock_.fallback().empty()) *console_ << "note: " << lock_.fallback() << "\n";
  remove_stale_temporaries();
}

// The folder lock guarantees no live save owns them.
void CheckpointManager::remove_stale_temporaries() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string name = entry.path().filename().string();
    const std::string step = name.ends_with(kReplaced) ? name.substr(0, name.size() - kReplaced.size()) : "";
    if (is_own_temporary(entry)) fs::remove_all(entry.path(), ec);
    else if (is_step_name(step)) settle_replaced(dir_ / step);
    else if (name.find(".tmp") != std::string::npos)
      say_left_alone(entry.path(), "not a temporary kiln writes");
  }
}

void CheckpointManager::say_left_alone(const fs::path& entry, const std::string& why) {
  if (!console_ || !named_.insert(entry).second) return;
  *console_ << fmt::format("note: {} left alone in the checkpoint folder ({})\n", entry.string(), why);
}

fs::path CheckpointManager::save(int64_t step, const ParamStore& params,
                                 const std::vector<FlatState>& optimizer,
                                 const nlohmann::json& meta,
                                 const std::vector<FlatState>& buffers) {
  NamedTensors model = param_tensors(params, params.values, "");
  for (auto& t : buffer_tensors(buffers)) model.push_back(std::move(t));
  NamedTensors state;
  for (auto& [name, buffer] : optimizer)
    for (auto& t : param_tensors(params, *buffer, name + ".")) state.push_back(std::move(t));
  return save(step, model, state, meta);
}

fs::path CheckpointManager::save(int64_t step, const NamedTensors& model, const NamedTensors& state,
                                 const nlohmann::json& meta) {
  const fs::path final_dir = dir_ / step_name(step);
  const fs::path tmp_dir = dir_ / (step_name(step) + ".tmp");
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  ensure_writable_dir(tmp_dir);
  try {
    write_unpublished(step, tmp_dir, model, state, meta);
  } catch (...) {
    fs::remove_all(tmp_dir, ec);  // a failed save (a full disk) leaves nothing behind
    throw;
  }

  publish(tmp_dir, final_dir, step);
  test_kill_point(step, "publish");
  write_file_atomic(dir_ / kPointerFile, [&](std::ostream& out) { out << step << "\n"; });
  test_kill_point(step, "pointer");
  prune(final_dir, step, meta.contains("run_id") ? meta.at("run_id") : nlohmann::json());
  return final_dir;
}

// Moves the complete checkpoint into place. Replacing an existing step swaps the two
// directories atomically (renameat2 RENAME_EXCHANGE), so the pointer file never names a
// missing or partial directory, even for an instant.
void CheckpointManager::publish(const fs::path& tmp_dir, const fs::path& final_dir, int64_t step) {
  const bool replace = fs::exists(final_dir);
  if (replace && exchange_refused_for_test()) return publish_by_moving_aside(tmp_dir, final_dir, step);
  const int rc = replace ? ::renameat2(AT_FDCWD, tmp_dir.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE)
                         : ::rename(tmp_dir.c_str(), final_dir.c_str());
  if (rc != 0 && replace && exchange_unsupported(errno)) return publish_by_moving_aside(tmp_dir, final_dir, step);
  if (rc != 0)
    throw Error("{}: cannot move checkpoint into place: {}", final_dir.string(), std::strerror(errno));
  fsync_path(dir_);
  std::error_code ec;
  if (replace) fs::remove_all(tmp_dir, ec);  // now holds the replaced checkpoint
}

// Where RENAME_EXCHANGE is refused (NFS, CephFS, Lustre clients): the replaced checkpoint moves
// aside to iter_N.replaced, then the new one into place. A kill between the two leaves the old
// one complete under iter_N.replaced; latest_checkpoint moves it back before anything reads it.
void CheckpointManager::publish_by_moving_aside(const fs::path& tmp_dir, const fs::path& final_dir, int64_t step) {
  if (console_ && !said_no_exchange_) *console_ << fmt::format("note: {} refuses RENAME_EXCHANGE: a checkpoint saved "
                                                                "again is moved aside first\n", dir_.string());
  said_no_exchange_ = true;
  const fs::path aside = replaced_name(final_dir);
  std::error_code ec;
  fs::remove_all(aside, ec);
  const auto move = [](const fs::path& from, const fs::path& to) {
    if (::rename(from.c_str(), to.c_str()) != 0)
      throw Error("{}: cannot move checkpoint into place: {}", to.string(), std::strerror(errno));
  };
  move(final_dir, aside);
  fsync_path(dir_);
  test_kill_point(step, "aside");
  move(tmp_dir, final_dir);
  fsync_path(dir_);
  fs::remove_all(aside, ec);
}

// Keeps the newest `keep_` checkpoints of this run and, whatever their order, the one just written
// (which the pointer names). The others are renamed to temporaries before they are deleted, so a kill
// while deleting leaves a temporary (removed at the next start), never a checkpoint's name on a
// half-deleted folder.
void CheckpointManager::prune(const fs::path& current, int64_t step, const nlohmann::json& run_id) {
  std::vector<fs::path> existing;
  for (auto& entry : fs::directory_iterator(dir_)) {
    if (!entry.is_directory() || !is_step_name(entry.path().filename().string())) continue;
    if (run_of(entry.path()) == run_id) existing.push_back(entry.path());
    else say_left_alone(entry.path(), "another run's checkpoint: not pruned");
  }
  std::sort(existing.begin(), existing.end());
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (size_t i = 0; i + size_t(keep_) < existing.size(); ++i) {
    if (existing[i] == current) continue;
    const fs::path tmp = existing[i].string() + ".tmp";
    fs::remove_all(tmp, ec);
    fs::rename(existing[i], tmp, ec);
    if (!ec) doomed.push_back(tmp);
  }
  if (doomed.empty()) return;
  fsync_path(dir_);
  test_kill_point(step, "prune");
  for (const fs::path& tmp : doomed) fs::remove_all(tmp, ec);
}

std::optional<fs::path> CheckpointManager::latest() const { return latest_checkpoint(dir_); }

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  const fs::path pointer = dir / kPointerFile;
  if (!fs::exists(pointer)) return std::nullopt;
  const std::string text = read_file(pointer);
  char* end = nullptr;
  const long long step = std::strtoll(text.c_str(), &end, 10);
  while (end && (*end == '\n' || *end == ' ' || *end == '\r')) ++end;
  if (text.empty() || !end || *end != '\0' || step < 0)
    throw Error("{}: expected an iteration number, got '{}'", pointer.string(), text);
  const fs::path path = dir / step_name(step);
  if (!fs::is_directory(path)) settle_replaced(path);  // a replacement killed halfway: the old one is whole
  if (!fs::is_directory(path))
    throw Error("{}: names iteration {}, but {} does not exist", pointer.string(), step, path.string());
  return path;
}

void load_checkpoint(const fs::path& checkpoint, ParamStore& params, const std::vector<FlatState>& optimizer,
                     const std::vector<FlatState>& buffers) {
  const fs::path model_file = checkpoint / "model.safetensors";
  const SafetensorsFile model = SafetensorsFile::open(model_file);
  restore(model, model_file, params, params.values, "");
  restore_buffers(model, model_file, buffers);
  if (optimizer.empty()) return;
  const fs::path opt_file = checkpoint / "optimizer.safetensors";
  const SafetensorsFile opt = SafetensorsFile::open(opt_file);
  for (auto& [name, buffer] : optimizer) restore(opt, opt_file, params, *buffer, name + ".");
}

void save_model(const fs::path& file, const ParamStore& params) {
  save_safetensors(file, param_tensors(params, params.values, ""));
}

}  // namespace kiln::io
