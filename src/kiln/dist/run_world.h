// dist/run_world.h — the world communicator of a run on `device`: dist::world() on the host; on
// GPUs with several processes, NCCL where it is built in (dist/nccl/nccl_communicator.h;
// KILN_NCCL=0 turns it off); otherwise the world staged through host buffers
// (dist/staged_communicator.h). Here, below train/, so that nothing above the backend includes
// CUDA or NCCL headers: dist/nccl/ holds them, and this file asks the backend how many GPUs there are.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "kiln/core/device.h"
#include "kiln/dist/communicator.h"
#include "kiln/dist/staged_communicator.h"

namespace kiln::dist {

// "NCCL: 2.21.5" (the library a run would open), or why there is none: "NCCL: not built in", the
// load's error.
std::string nccl_version_line();

class RunWorld {
 public:
  explicit RunWorld(const Device& device);
  Communicator& get();

 private:
  std::unique_ptr<Communicator> nccl_;
  std::optional<StagedCommunicator> staged_;
};

}  // namespace kiln::dist
