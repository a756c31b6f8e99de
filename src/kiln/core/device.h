// core/device.h — where a tensor's memory lives and which backend runs the ops on it.
#pragma once
#include <cstdint>
#include <string>

namespace kiln {

// sim: a simulated device. Its memory is on the host and the CPU backend runs its ops, but it is
// not the host: every tensor an op takes must be on it and data crosses only by ops::copy, as
// with a GPU. A run on it takes the GPU's path through the engine (device parameter store,
// staged inputs, staged checkpoints) on a machine without one.
enum class DeviceKind : uint8_t { cpu, cuda, sim };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // which GPU; always 0 for the CPU

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceKind::cuda, index}; }
  static Device sim() { return {DeviceKind::sim, 0}; }
  // The host: memory that host code may read and write.
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  // Ops on it run in backend/cpu (the host and the simulated device).
  bool cpu_kernels() const { return kind != DeviceKind::cuda; }
  bool operator==(const Device&) const = default;
  std::string str() const {
    return kind == DeviceKind::cpu ? "cpu" : kind == DeviceKind::sim ? "sim" : "cuda:" + std::to_string(index);
  }
};

}  // namespace kiln
