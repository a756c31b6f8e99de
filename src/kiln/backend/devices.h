// backend/devices.h — which backends this kiln is built with, which devices the machine has, and
// contexts for running ops on one of them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/context.h"

namespace kiln {

// The GPU libraries' versions, one line each (backend/cuda/runtime.h's library_versions), or
// "CUDA: not built in".
std::vector<std::string> library_lines();
// "cpu" or "cpu, cuda".
std::string compiled_backends();
// One line per device kind: "cpu", "sim: ..." (core/device.h), then
// "cuda:0: NVIDIA H200, 140 GiB, sm_90" per GPU, or
// "cuda: none (no usable CUDA driver or device (...))"; no cuda line without the backend.
std::vector<std::string> device_lines();
// "cpu", "cuda" (this process's GPU: the one of its rank on the machine, `local_rank`, taken
// round robin over the GPUs present, as torchrun's LOCAL_RANK picks one; cuda:0 where none is),
// "cuda:N" or "sim" (the simulated device, core/device.h); a kiln::Error naming `what` (the flag
// or config key) otherwise.
Device parse_device(std::string_view text, std::string_view what, int local_rank = 0);
// GPUs present: 0 without the CUDA backend, a driver or a device (never throws).
int gpu_count();
// The GPU of local rank `local_rank` among `gpus` present (round robin; cuda:0 when there are none).
Device local_gpu(int local_rank, int gpus);
// A context for ops on `device`: a CUDA device's own stream. A one-line kiln::Error when the
// device's backend is not compiled in or the device is not present.
Context device_context(Device device);

}  // namespace kiln
