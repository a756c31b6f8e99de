// backend/profile.h — KILN_PROFILE=1: wall time per op type. Every backend op opens an OpScope
// (route.h's expect_cpu returns one); while recording is on, the outermost open op's time is added
// to its type (ops called inside another op count for the outer one). The training loop records
// its steps after the first (warm-up) and prints the table at the end of the run. On an
// asynchronous device a scope would have to synchronise its stream; the CPU is synchronous.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace kiln::ops {

// Whether KILN_PROFILE is set to something other than 0 (read once).
bool profile_requested();

class OpScope {
 public:
  explicit OpScope(const char* op);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* op_;  // null when this scope does not record
  std::chrono::steady_clock::time_point start_;
};

// Starts or stops adding op times to the table.
void set_profile_recording(bool on);
// The table: per op type, calls, total ms and share of `wall_seconds` (the wall time of the
// recorded steps, which also holds the time outside ops), longest first, then "outside ops".
std::string profile_report(double wall_seconds, int64_t steps);
void reset_profile();

}  // namespace kiln::ops
