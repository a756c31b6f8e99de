#include "kiln/backend/cuda/runtime.h"

#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "kiln/core/allocator.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// cudaGetDeviceCount's result, asked once (it loads the driver).
cudaError_t count_devices(int* count) {
  static int n = 0;
  static const cudaError_t err = [] {
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) n = 0;
    return e;
  }();
  *count = n;
  return err;
}

void* alloc_on(int index, size_t bytes) {
  require_device(Device::cuda(index));
  check(cudaSetDevice(index), "cudaSetDevice");
  void* p = nullptr;
  return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
}

void free_on(int index, void* p) {
  cudaSetDevice(index);
  cudaFree(p);
}

}  // namespace

bool capturing(cudaStream_t stream, const char* what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &status), what);
  return status != cudaStreamCaptureStatusNone;
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error("CUDA: {}: {}", what, cudaGetErrorString(err));
}

int device_count() {
  int n = 0;
  count_devices(&n);
  return n;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t err = count_devices(&n);
  if (n > 0) return "";
  if (err == cudaErrorNoDevice || err == cudaSuccess) return "no CUDA device is present";
  return fmt::format("no usable CUDA driver or device ({})", cudaGetErrorString(err));
}

void require_device(const Device& device) {
  const int n = device_count();
  KILN_CHECK(n > 0, "device {}: {}", device.str(), unavailable_reason());
  KILN_CHECK(device.index >= 0 && device.index < n, "device {}: this machine has {} CUDA device{}",
             device.str(), n, n == 1 ? "" : "s");
}

std::string describe_device(int index) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  return fmt::format("{}, {} GiB, sm_{}{}", p.name, p.totalGlobalMem >> 30, p.major, p.minor);
}

int multiprocessor_count() {
  static std::mutex mu;
  static std::vector<int> counts(size_t(device_count()), 0);
  int index = 0;
  check(cudaGetDevice(&index), "cudaGetDevice");
  const std::lock_guard lock(mu);
  int& n = counts.at(size_t(index));
  if (n == 0) check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, index), "multiprocessor count");
  return n;
}

namespace {

// Stream `which` of device `index`, created on first use and kept for the process.
cudaStream_t process_stream(int index, int which) {
  static std::mutex mu;
  static std::vector<cudaStream_t> streams(2 * size_t(device_count()), nullptr);
  require_device(Device::cuda(index));
  const std::lock_guard lock(mu);
  cudaStream_t& s = streams[2 * size_t(index) + size_t(which)];
  if (!s) {
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  return s;
}

}  // namespace

cudaStream_t device_stream(int index) { return process_stream(index, 0); }

cudaStream_t copy_stream(int index) { return process_stream(index, 1); }

void register_allocator() { register_device_allocator(DeviceKind::cuda, {alloc_on, free_on}); }

}  // namespace kiln::ops::cuda
