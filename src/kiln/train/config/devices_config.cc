#include "kiln/train/config/devices_config.h"

#include "kiln/core/error.h"
#include "kiln/dist/world.h"

namespace kiln::train {

void register_devices_config(ConfigRegistry& r, int64_t& devices) {
  r.add_int("parallel.devices", &devices, "GPUS", {"--devices"},
            "devices the run is for, one process each (0: the processes started; a dry run plans for N)");
}

int64_t resolve_devices(int64_t requested, bool dry_run) {
  const int64_t started = dist::world().size();
  if (requested < 0) throw Error("config: parallel.devices (GPUS) must be >= 0, got {}", requested);
  if (requested == 0) return started;
  if (!dry_run && requested != started)
    throw Error("{} devices (GPUS, --devices or parallel.devices): kiln runs one process per device; start {} with "
                "mpirun -np {} (this is {} process{})", requested, requested, requested, started, started == 1 ? "" : "es");
  return requested;
}

int64_t data_parallel_devices(int64_t devices, int64_t tp, int64_t pp) {
  if (devices % (tp * pp) != 0)
    throw Error("config: {} devices do not split into --tensor-model-parallel-size {} x --pipeline-model-parallel-size "
                "{}: start a multiple of {}", devices, tp, pp, tp * pp);
  return devices / (tp * pp);
}

}  // namespace kiln::train
