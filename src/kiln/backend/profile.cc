#include "kiln/backend/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::ops {
namespace {

struct OpTotal {
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
};

using ShapeKey = std::pair<std::string, std::string>;  // op, shape text

struct Profile {
  std::mutex mutex;
  bool recording = false;
  std::map<ShapeKey, OpTotal> totals;
};

Profile& profile() {
  static Profile p;
  return p;
}

thread_local int open_ops = 0;  // ops open on this thread (an op may call another)
thread_local OpShape noted;     // the next op's shape (ShapeNote)

template <typename Rows>
void sort_longest_first(Rows& rows) {
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
}

std::vector<std::pair<std::string, OpTotal>> by_op(const std::map<ShapeKey, OpTotal>& totals) {
  std::map<std::string, OpTotal> ops;
  for (const auto& [key, t] : totals) {
    OpTotal& o = ops[key.first];
    o.calls += t.calls;
    o.seconds += t.seconds;
  }
  std::vector<std::pair<std::string, OpTotal>> rows(ops.begin(), ops.end());
  sort_longest_first(rows);
  return rows;
}

// Per (op, shape): calls and ms per step, and what the op achieved ("-" where it has no FLOPs or
// bytes noted).
std::string shape_rows(const std::map<ShapeKey, OpTotal>& totals, double per_step) {
  std::vector<std::pair<ShapeKey, OpTotal>> rows(totals.begin(), totals.end());
  sort_longest_first(rows);
  std::string out = "profile per op and shape: op | shape | calls/step | ms/step | TFLOP/s | GB/s\n";
  const auto rate = [](double amount, double seconds, double unit) {
    return amount > 0 && seconds > 0 ? fmt::format("{:.2f}", amount / seconds / unit) : std::string("-");
  };
  for (const auto& [key, t] : rows)
    out += fmt::format("  {} | {} | {:.1f} | {:.3f} | {} | {}\n", key.first, key.second.empty() ? "-" : key.second,
                       double(t.calls) * per_step / 1e3, t.seconds * per_step, rate(t.flops, t.seconds, 1e12),
                       rate(t.bytes, t.seconds, 1e9));
  return out;
}

}  // namespace

bool profile_requested() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_PROFILE");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

bool profile_noting() { return open_ops == 0 && profile().recording; }

void ShapeNote::note(OpShape shape) {
  noted = std::move(shape);
  noted_ = true;
}

void ShapeNote::forget() { noted = OpShape{}; }

OpScope::OpScope(const char* op, Sync sync, void* stream) : op_(nullptr), sync_(sync), stream_(stream) {
  count_open_ops(1);
  if (++open_ops != 1 || !profile().recording) return;
  op_ = op;
  shape_ = std::exchange(noted, OpShape{});
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
  OpTotal& t = p.totals[{op_, std::move(shape_.text)}];
  ++t.calls;
  t.seconds += s;
  t.flops += shape_.flops;
  t.bytes += shape_.bytes;
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
  const auto rows = by_op(p.totals);
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
  return out + shape_rows(p.totals, per_step);
}

}  // namespace kiln::ops
