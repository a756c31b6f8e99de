// train/config/devices_config.h — how many devices (one process each) a run is for: tinygrad's GPUS=N,
// `--devices N`, TOML parallel.devices. Unset, the processes the launcher started. A training run
// must have been started as that many processes; a dry run plans for that many without them, so
// `kiln train ... --dry-run` prints a preset's memory per device and FLOPs per step for the
// devices it names. tinygrad's batch defaults scale with it (BS = 8 or 11 x GPUS, ...).
#pragma once
#include <cstdint>

#include "kiln/train/config/config_registry.h"

namespace kiln::train {

void register_devices_config(ConfigRegistry& r, int64_t& devices);

// `requested` (0: unset) against the launcher's process count; throws kiln::Error when a training
// run was started as another number of processes. Returns the devices the run is for.
int64_t resolve_devices(int64_t requested, bool dry_run);

// The data-parallel devices of `devices` split into groups of tp x pp; throws kiln::Error when
// they do not split.
int64_t data_parallel_devices(int64_t devices, int64_t tp, int64_t pp);

}  // namespace kiln::train
