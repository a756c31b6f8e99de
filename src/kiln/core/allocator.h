// core/allocator.h — every tensor allocation goes through here: host memory (64-byte aligned)
// for the CPU, and whatever a device backend registers for its device kind. Counts allocations
// so that tests can prove the steady-state step allocates nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kiln/core/device.h"

namespace kiln {

struct DeviceAllocator {
  void* (*alloc)(int device_index, size_t bytes) = nullptr;  // null result = out of memory
  void (*free)(int device_index, void* p) = nullptr;
};

// A backend registers its allocator once, before any tensor of its kind is made.
void register_device_allocator(DeviceKind kind, DeviceAllocator allocator);

// Owning pointer to `bytes` (rounded up to 64) on `device`; throws kiln::Error when the device
// has no allocator in this build or is out of memory.
std::shared_ptr<std::byte[]> device_alloc(Device device, size_t bytes);

// Number of device_alloc calls so far in this process (all devices).
int64_t allocation_count();
// Those of them on a device (anything but the host): a graph's captured addresses stay valid
// while it does not change.
int64_t device_allocation_count();
// Bytes currently held through device_alloc on the host, and the most held at once.
size_t host_bytes_in_use();
size_t host_bytes_peak();
// The same for memory on devices (a process drives one): CUDA's and the simulated device's.
size_t device_bytes_in_use();
size_t device_bytes_peak();

}  // namespace kiln
