#include "kiln/backend/devices.h"

#include <fmt/format.h>

#include <charconv>

#include "kiln/core/error.h"
#ifdef KILN_HAVE_CUDA
#include "kiln/backend/cuda/runtime.h"
#endif

namespace kiln {

std::string compiled_backends() {
#ifdef KILN_HAVE_CUDA
  return "cpu, cuda";
#else
  return "cpu";
#endif
}

std::vector<std::string> device_lines() {
  std::vector<std::string> lines{"cpu", "sim: simulated device (host memory, CPU kernels, a GPU's data path)"};
#ifdef KILN_HAVE_CUDA
  const int n = ops::cuda::device_count();
  if (n == 0) lines.push_back(fmt::format("cuda: none ({})", ops::cuda::unavailable_reason()));
  for (int i = 0; i < n; ++i)
    lines.push_back(fmt::format("cuda:{}: {}", i, ops::cuda::describe_device(i)));
#endif
  return lines;
}

std::vector<std::string> library_lines() {
#ifdef KILN_HAVE_CUDA
  return ops::cuda::library_versions();
#else
  return {"CUDA: not built in"};
#endif
}

int gpu_count() {
#ifdef KILN_HAVE_CUDA
  return ops::cuda::device_count();
#else
  return 0;
#endif
}

Device local_gpu(int local_rank, int gpus) { return Device::cuda(gpus > 0 ? local_rank % gpus : 0); }

Device parse_device(std::string_view text, std::string_view what, int local_rank) {
  if (text == "cpu") return Device::cpu();
#ifdef KILN_HAVE_CUDA
  if (text == "cuda") return local_gpu(local_rank, ops::cuda::device_count());
#else
  if (text == "cuda") return local_gpu(local_rank, 0);
#endif
  if (text == "sim") return Device::sim();
  int index = -1;
  if (text.starts_with("cuda:")) {
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    const auto [end, err] = std::from_chars(first, last, index);
    if (err == std::errc() && end == last && first != last && index >= 0)
      return Device::cuda(index);
  }
  throw Error("{}: '{}' is not a device (cpu, cuda, cuda:N or sim)", what, text);
}

Context device_context(Device device) {
  if (device.cpu_kernels()) return Context{device, nullptr, nullptr};
#ifdef KILN_HAVE_CUDA
  return Context{device, ops::cuda::device_stream(device.index), nullptr};
#else
  throw Error("device {}: no backend for it is compiled into this kiln (built without CUDA)",
              device.str());
#endif
}

}  // namespace kiln
