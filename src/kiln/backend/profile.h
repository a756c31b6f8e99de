// backend/profile.h — KILN_PROFILE=1: wall time per op type. Every backend op opens an OpScope
// (route.h's expect_cpu returns one); while recording is on, the outermost open op's time is added
// to its type (ops called inside another op count for the outer one). The training loop records
// its steps after the first (warm-up) and prints the table at the end of the run. On an
// asynchronous device the scope synchronises the op's stream when it opens and when it closes
// (only while recording), so that the time is the op's and not its launch's.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace kiln::ops {

// Whether KILN_PROFILE is set to something other than 0 (read once).
bool profile_requested();

class OpScope {
 public:
  // `sync(stream)` waits for the device's work on `stream` (null: a synchronous device).
  using Sync = void (*)(void* stream);
  explicit OpScope(const char* op, Sync sync = nullptr, void* stream = nullptr);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* op_;  // null when this scope does not record
  Sync sync_;
  void* stream_;
  std::chrono::steady_clock::time_point start_;
};

// Starts or stops adding op times to the table.
void set_profile_recording(bool on);
// The table: per op type, calls, total ms and share of `wall_seconds` (the wall time of the
// recorded steps, which also holds the time outside ops), longest first, then "outside ops".
std::string profile_report(double wall_seconds, int64_t steps);
void reset_profile();

}  // namespace kiln::ops
