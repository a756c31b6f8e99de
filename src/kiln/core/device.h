// core/device.h — where a tensor's memory lives and which backend runs the ops on it.
#pragma once
#include <cstdint>
#include <string>

namespace kiln {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // which GPU; always 0 for the CPU

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceKind::cuda, index}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace kiln
