#include "kiln/core/allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>

#include "kiln/core/error.h"

namespace kiln {
namespace {

std::array<DeviceAllocator, 3> g_allocators{};
std::atomic<int64_t> g_count{0};
std::atomic<int64_t> g_device_count{0};  // of them off the host

struct Usage {
  std::atomic<size_t> in_use{0}, peak{0};
  void add(size_t bytes) {
    const size_t now = in_use.fetch_add(bytes) + bytes;
    size_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
};
Usage g_host, g_device;

// Aligned host memory counted in `usage`: the host's, and the simulated device's.
std::shared_ptr<std::byte[]> host_alloc(size_t bytes, Usage& usage, const Device& device) {
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, bytes));
  KILN_CHECK(p, "out of host memory allocating {} bytes for {}", bytes, device.str());
  usage.add(bytes);
  return std::shared_ptr<std::byte[]>(p, [bytes, &usage](std::byte* q) {
    usage.in_use -= bytes;
    std::free(q);
  });
}

}  // namespace

void register_device_allocator(DeviceKind kind, DeviceAllocator allocator) {
  g_allocators[size_t(kind)] = allocator;
}

std::shared_ptr<std::byte[]> device_alloc(Device device, size_t bytes) {
  bytes = std::max<size_t>((bytes + 63) / 64 * 64, 64);
  ++g_count;
  if (device.is_cpu()) return host_alloc(bytes, g_host, device);
  ++g_device_count;
  if (device.kind == DeviceKind::sim) return host_alloc(bytes, g_device, device);
  const DeviceAllocator a = g_allocators[size_t(device.kind)];
  KILN_CHECK(a.alloc, "no backend for device {} is compiled into this kiln", device.str());
  auto* p = static_cast<std::byte*>(a.alloc(device.index, bytes));
  KILN_CHECK(p, "out of memory on {} allocating {} bytes", device.str(), bytes);
  g_device.add(bytes);
  const int index = device.index;
  return std::shared_ptr<std::byte[]>(p, [a, index, bytes](std::byte* q) {
    g_device.in_use -= bytes;
    a.free(index, q);
  });
}

int64_t allocation_count() { return g_count.load(); }
int64_t device_allocation_count() { return g_device_count.load(); }
size_t host_bytes_in_use() { return g_host.in_use.load(); }
size_t host_bytes_peak() { return g_host.peak.load(); }
size_t device_bytes_in_use() { return g_device.in_use.load(); }
size_t device_bytes_peak() { return g_device.peak.load(); }

}  // namespace kiln
