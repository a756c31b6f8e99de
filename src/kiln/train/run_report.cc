#include "kiln/train/run_report.h"


#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "kiln/core/allocator.h"

namespace kiln::train {

MemoryUse memory_use() {
  MemoryUse m;
  m.tensors = host_bytes_in_use();
  m.tensors_peak = host_bytes_peak();
  m.device = device_bytes_in_use();
  m.device_peak = device_bytes_peak();
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    size_t* field = line.rfind("VmRSS:", 0) == 0 ? &m.rss : line.rfind("VmHWM:", 0) == 0 ? &m.rss_peak : nullptr;
    if (field) *field = size_t(std::strtoull(line.c_str() + 6, nullptr, 10)) * 1024;  // "  1234 kB"
  }
  return m;
}

std::string memory_text(const MemoryUse& m) {
  const auto g = [](size_t bytes) { return double(bytes) / double(int64_t(1) << 30); };
  const std::string device =
      m.device_peak > 0 ? fmt::format("device {:.2f} GiB (peak {:.2f}), ", g(m.device), g(m.device_peak)) : "";
  return fmt::format("{}tensors {:.2f} GiB (peak {:.2f}), RSS {:.2f} GiB (peak {:.2f})", device, g(m.tensors),
                     g(m.tensors_peak), g(m.rss), g(m.rss_peak));
}

std::string estimated_training_time(std::vector<double> step_seconds, int64_t total_steps) {
  if (step_seconds.size() > kWarmupSteps) step_seconds.erase(step_seconds.begin(), step_seconds.begin() + kWarmupSteps);
  std::sort(step_seconds.begin(), step_seconds.end());
  const double median = step_seconds[step_seconds.size() / 2];
  const double total = median * double(total_steps);
  return fmt::format("Estimated training time: {}h{}m ({} steps at a median {:.1f} ms/step)\n",
                     int64_t(total / 3600), int64_t(std::fmod(total, 3600) / 60), total_steps,
                     median * 1e3);
}

}  // namespace kiln::train
