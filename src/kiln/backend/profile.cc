#include "kiln/backend/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::ops {
namespace {

struct OpTotal {
  int64_t calls = 0;
  double seconds = 0;
};

struct Profile {
  std::mutex mutex;
  bool recording = false;
  std::map<std::string, OpTotal, std::less<>> totals;
};

Profile& profile() {
  static Profile p;
  return p;
}

thread_local int open_ops = 0;  // ops open on this thread (an op may call another)

}  // namespace

bool profile_requested() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_PROFILE");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

OpScope::OpScope(const char* op, Sync sync, void* stream) : op_(nullptr), sync_(sync), stream_(stream) {
  count_open_ops(1);
  if (++open_ops != 1 || !profile().recording) return;
  op_ = op;
  if (sync_) sync_(stream_);  // work queued before this op is not its time
  start_ = std::chrono::steady_clock::now();
}

OpScope::~OpScope() {
  count_open_ops(-1);
  --open_ops;
  if (op_ == nullptr) return;
  if (sync_) sync_(stream_);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  Profile& p = profile();
  const std::lock_guard lock(p.mutex);
  auto it = p.totals.find(std::string_view(op_));
  if (it == p.totals.end()) it = p.totals.emplace(op_, OpTotal{}).first;
  ++it->second.calls;
  it->second.seconds += s;
}

void set_profile_recording(bool on) { profile().recording = on; }

void reset_profile() {
  Profile& p = profile();
  const std::lock_guard lock(p.mutex);
  p.totals.clear();
}

std::string profile_report(double wall_seconds, int64_t steps) {
  Profile& p = profile();
  const std::lock_guard lock(p.mutex);
  std::vector<std::pair<std::string, OpTotal>> rows(p.totals.begin(), p.totals.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double in_ops = 0;
  for (const auto& r : rows) in_ops += r.second.seconds;
  const double per_step = steps > 0 ? 1e3 / double(steps) : 0.0;
  const double wall = std::max(wall_seconds, 1e-12);
  std::string out = fmt::format("profile over {} steps ({:.1f} ms/step): op, calls/step, ms/step, share\n", steps,
                                wall_seconds * per_step);
  for (const auto& [op, t] : rows)
    out += fmt::format("  {:<26} {:>8.1f} {:>9.2f} {:>6.1f}%\n", op, double(t.calls) * per_step / 1e3,
                       t.seconds * per_step, 100.0 * t.seconds / wall);
  out += fmt::format("  {:<26} {:>8} {:>9.2f} {:>6.1f}%\n", "(outside ops)", "", (wall_seconds - in_ops) * per_step,
                     100.0 * (wall_seconds - in_ops) / wall);
  return out;
}

}  // namespace kiln::ops
