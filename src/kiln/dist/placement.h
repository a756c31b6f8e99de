// dist/placement.h — N ranks on one machine share its cores without oversubscribing it. When the
// launcher left every rank free to run anywhere (`mpirun --bind-to none`, srun without
// --cpu-bind), each rank pins itself to its own contiguous slice of the cores and runs that many
// OpenMP threads; a rank the launcher already bound keeps its binding and uses its cores.
// --threads N or OMP_NUM_THREADS set the thread count explicitly; KILN_NO_PIN=1 skips pinning.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dist/communicator.h"

namespace kiln::dist {

// The cores of slice `local_rank` of `local_size` equal contiguous slices of `cores` (the
// remainder goes to the first slices); with fewer cores than ranks, one core each, shared in turn.
std::vector<int> rank_cores(const std::vector<int>& cores, int local_rank, int local_size);

struct Placement {
  std::vector<int> cores;   // this rank may run on
  bool pinned_by_kiln = false;
  int threads = 0;          // OpenMP threads of this rank
  std::string describe(const Communicator& comm) const;  // one line for the console
};

// Pins this process (before it starts any thread) and sets OpenMP's thread count as described
// above; `requested_threads` > 0 is --threads.
Placement place_rank(const Communicator& comm, int64_t requested_threads);

}  // namespace kiln::dist
