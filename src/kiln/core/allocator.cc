#include "kiln/core/allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>

#include "kiln/core/error.h"

namespace kiln {
namespace {

std::array<DeviceAllocator, 2> g_allocators{};
std::atomic<int64_t> g_count{0};
std::atomic<size_t> g_host_in_use{0}, g_host_peak{0};

void note_host(size_t bytes) {
  const size_t now = g_host_in_use.fetch_add(bytes) + bytes;
  size_t peak = g_host_peak.load();
  while (now > peak && !g_host_peak.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace

void register_device_allocator(DeviceKind kind, DeviceAllocator allocator) {
  g_allocators[size_t(kind)] = allocator;
}

std::shared_ptr<std::byte[]> device_alloc(Device device, size_t bytes) {
  bytes = std::max<size_t>((bytes + 63) / 64 * 64, 64);
  ++g_count;
  if (device.is_cpu()) {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, bytes));
    KILN_CHECK(p, "out of host memory allocating {} bytes", bytes);
    note_host(bytes);
    return std::shared_ptr<std::byte[]>(p, [bytes](std::byte* q) {
      g_host_in_use -= bytes;
      std::free(q);
    });
  }
  const DeviceAllocator a = g_allocators[size_t(device.kind)];
  KILN_CHECK(a.alloc, "no backend for device {} is compiled into this kiln", device.str());
  auto* p = static_cast<std::byte*>(a.alloc(device.index, bytes));
  KILN_CHECK(p, "out of memory on {} allocating {} bytes", device.str(), bytes);
  const int index = device.index;
  return std::shared_ptr<std::byte[]>(p, [a, index](std::byte* q) { a.free(index, q); });
}

int64_t allocation_count() { return g_count.load(); }
size_t host_bytes_in_use() { return g_host_in_use.load(); }
size_t host_bytes_peak() { return g_host_peak.load(); }

}  // namespace kiln
