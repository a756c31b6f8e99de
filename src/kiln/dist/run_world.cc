#include "kiln/dist/run_world.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "kiln/backend/devices.h"
#include "kiln/core/error.h"
#include "kiln/dist/world.h"
#ifdef KILN_HAVE_NCCL
#include "kiln/dist/nccl/nccl_communicator.h"
#include "kiln/dist/nccl/nccl_library.h"
#endif

namespace kiln::dist {

std::string nccl_version_line() {
#ifdef KILN_HAVE_NCCL
  try {
    int v = 0;
    if (nccl().GetVersion(&v) != ncclSuccess) return "NCCL: ncclGetVersion failed";
    // NCCL 2.9+: major * 10000 + minor * 100 + patch.
    return fmt::format("NCCL: {}.{}.{}", v / 10000, v % 10000 / 100, v % 100);
  } catch (const Error& e) {
    return fmt::format("NCCL: not loaded ({})", e.what());
  }
#else
  return "NCCL: not built in";
#endif
}

RunWorld::RunWorld(const Device& device) {
  if (device.is_cpu()) return;
#ifdef KILN_HAVE_NCCL
  const char* use_nccl = std::getenv("KILN_NCCL");
  if (device.kind == DeviceKind::cuda && world().size() > 1 && !(use_nccl && std::string(use_nccl) == "0")) {
    const int ranks = world().local_size(), gpus = gpu_count();
    if (ranks > gpus)
      throw Error("--device {}: {} ranks on this machine share {} GPU(s); NCCL needs a GPU per rank (KILN_NCCL=0 "
                  "stages the collectives through the host instead)",
                  device.str(), ranks, gpus);
    nccl_ = nccl_communicator(world(), device);
    return;
  }
#endif
  staged_.emplace(world(), device);
}

Communicator& RunWorld::get() {
  if (nccl_) return *nccl_;
  if (staged_) return *staged_;
  return world();
}

}  // namespace kiln::dist
