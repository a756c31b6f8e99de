// train/process_stats.h — what the console line reports about the process itself.
#pragma once

namespace kiln::train {

// Resident memory of this process, GiB (/proc/self/statm).
double resident_gib();

}  // namespace kiln::train
