// backend/profile.h — KILN_PROFILE=1: wall time per op type and per (op, shape). Every backend op
// opens an OpScope (route.h's expect_cpu returns one); while recording is on, the outermost open
// op's time is added to its row (ops called inside another op count for the outer one). The
// dispatch (backend/dispatch.cc) notes each op's shape, FLOPs and bytes before running it, only
// while recording, so the table can say what each shape achieved. The training loop records its
// steps after the first (warm-up) and prints the table at the end of the run. On an asynchronous
// device the scope synchronises the op's stream when it opens and when it closes (only while
// recording), so that the time is the op's and not its launch's.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace kiln::ops {

// Whether KILN_PROFILE is set to something other than 0 (read once).
bool profile_requested();

// An op's operands as the per-(op, shape) rows show them ("8192x1024x1024 bf16,bf16->bf16"), with
// the FLOPs it computes and the bytes it reads and writes (each operand once: an estimate).
struct OpShape {
  std::string text;
  double flops = 0;
  double bytes = 0;
};

// Whether an op opened now on this thread would be recorded (recording, no op open on the thread).
bool profile_noting();

// Notes the shape of the op that this thread opens next; that op's OpScope takes it. `describe`
// runs only when the op will be recorded: with KILN_PROFILE off nothing is formatted.
class ShapeNote {
 public:
  template <typename Describe>
  explicit ShapeNote(const Describe& describe) {
    if (profile_noting()) note(describe());
  }
  ~ShapeNote() {
    if (noted_) forget();
  }
  ShapeNote(const ShapeNote&) = delete;
  ShapeNote& operator=(const ShapeNote&) = delete;

 private:
  void note(OpShape shape);
  static void forget();
  bool noted_ = false;
};

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
  OpShape shape_;  // the dispatch's note, when it made one
  std::chrono::steady_clock::time_point start_;
};

// Starts or stops adding op times to the table.
void set_profile_recording(bool on);
// The tables: per op type, calls, total ms and share of `wall_seconds` (the wall time of the
// recorded steps, which also holds the time outside ops), longest first, then "outside ops";
// then per (op, shape), longest first: calls, ms, and the achieved TFLOP/s and GB/s, in rows of
// fields separated by " | " for scripts (tools/gpu_check.sh).
std::string profile_report(double wall_seconds, int64_t steps);
void reset_profile();

}  // namespace kiln::ops
