// train/run_report.h — what the console reports about the run itself.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::train {

// Memory of this process, bytes. `tensors`: held through core/allocator (host_bytes_in_use;
// weights, gradients, optimizer state, layer buffers, the scratch arena); `tensors_peak`: the
// most held at once (host_bytes_peak), what `--dry-run` estimates as "tensors peak". `rss`,
// `rss_peak`: resident set now and at its highest (/proc/self/status VmRSS, VmHWM), which adds
// the program, libraries, oneDNN's scratchpads and the data pipeline.
struct MemoryUse {
  size_t tensors = 0, tensors_peak = 0, rss = 0, rss_peak = 0;
  size_t device = 0, device_peak = 0;  // on the run's device (device_bytes_in_use), 0 on the CPU
};
MemoryUse memory_use();
// "tensors 0.12 GiB (peak 0.15), RSS 0.31 GiB (peak 0.33)", after "device 1.2 GiB (peak 1.5), "
// when tensors were held on a device
std::string memory_text(const MemoryUse& m);

// BENCHMARK's closing line: "Estimated training time: XhYm (N steps at a median M ms/step)",
// from the median of the measured step times (tinygrad's estimate) after the first
// kWarmupSteps, which are left out where more steps than that were measured (primitive creation,
// first-touch page faults, graph capture). `step_seconds` non-empty.
inline constexpr size_t kWarmupSteps = 2;
std::string estimated_training_time(std::vector<double> step_seconds, int64_t total_steps);

}  // namespace kiln::train
