#include "kiln/train/run_report.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace kiln::train {

double resident_gib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / double(1 << 30);
}

std::string estimated_training_time(std::vector<double> step_seconds, int64_t total_steps) {
  std::sort(step_seconds.begin(), step_seconds.end());
  const double median = step_seconds[step_seconds.size() / 2];
  const double total = median * double(total_steps);
  return fmt::format("Estimated training time: {}h{}m ({} steps at a median {:.1f} ms/step)\n",
                     int64_t(total / 3600), int64_t(std::fmod(total, 3600) / 60), total_steps,
                     median * 1e3);
}

}  // namespace kiln::train
