#include "kiln/train/process_stats.h"

#include <unistd.h>

#include <fstream>

namespace kiln::train {

double resident_gib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / double(1 << 30);
}

}  // namespace kiln::train
