// train/run_report.h — what the console reports about the run itself.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::train {

// Resident memory of this process, GiB (/proc/self/statm).
double resident_gib();

// BENCHMARK's closing line: "Estimated training time: XhYm (N steps at a median M ms/step)",
// from the median of the measured step times (tinygrad's estimate). `step_seconds` non-empty.
std::string estimated_training_time(std::vector<double> step_seconds, int64_t total_steps);

}  // namespace kiln::train
