// train/dry_run/device_model.h — the accelerators the performance model (train/dry_run/perf_model.h) knows: their
// peak arithmetic rates, HBM bandwidth and interconnect, from NVIDIA's datasheets (cited below).
// `--device-model NAME` (TOML run.device_model) picks one for a dry run. Header-only, so that the
// configs' check links wherever the configs do (the fuzz library among them).
#pragma once
#include <array>
#include <string>
#include <string_view>

#include "kiln/core/error.h"

namespace kiln::train {

// Which peak an op's arithmetic runs at.
enum class Math : unsigned char {
  tensor16,  // bf16 / f16 operands on the tensor cores (dense)
  tf32,      // f32 operands on the tensor cores as TF32 (dense)
  fp32,      // f32 on the CUDA cores (FMA): kiln's f32 matmuls (CUBLAS_COMPUTE_32F) and every row op
};

struct DeviceModel {
  std::string_view name;         // the --device-model value: "h200"
  std::string_view description;  // "NVIDIA H200 SXM"
  double tensor16 = 0, tf32 = 0, fp32 = 0;  // FLOP/s, dense
  double hbm = 0;                // bytes/s
  // Interconnect for collectives, bytes/s per GPU and direction: NVLink within a node of
  // `node_gpus`, the network (one InfiniBand NIC per GPU) between nodes.
  double nvlink = 0, network = 0;
  int node_gpus = 8;

  constexpr double peak(Math m) const { return m == Math::tensor16 ? tensor16 : m == Math::tf32 ? tf32 : fp32; }
};

// Dense rates: NVIDIA's datasheets print the tensor-core rates with 2:4 sparsity (marked *); the
// dense rate is half. FP32 is the non-tensor (FMA) rate.
// H100 SXM: https://resources.nvidia.com/en-us-tensor-core/nvidia-h100-datasheet — FP32 67
//   TFLOPS, TF32 Tensor Core 989* (494.5 dense), BF16 / FP16 Tensor Core 1,979* (989 dense),
//   GPU memory bandwidth 3.35 TB/s, NVLink 900 GB/s (both directions together).
// H200 SXM: https://www.nvidia.com/en-us/data-center/h200/ (datasheet) — the H100 SXM's GH100 and
//   its rates (FP32 67, TF32 989*, BF16 / FP16 1,979*), HBM3e at 4.8 TB/s, NVLink 900 GB/s.
// A100 SXM 80GB: https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/
//   nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf — FP32 19.5 TFLOPS, TF32 156 (312*),
//   BF16 / FP16 312 (624*), GPU memory bandwidth 2,039 GB/s, NVLink 600 GB/s.
// NVLink per direction is half the datasheet's figure: 450 GB/s (18 NVLink 4 links), 300 GB/s
// (12 NVLink 3 links). Between nodes: one ConnectX-7 (400 Gb/s = 50 GB/s) per GPU, the HGX / DGX
// layout; an A100 node's ConnectX-6 gives 200 Gb/s = 25 GB/s.
inline constexpr std::array<DeviceModel, 3> kDeviceModels = {{
    {"h200", "NVIDIA H200 SXM", 989e12, 494.5e12, 67e12, 4.8e12, 450e9, 50e9, 8},
    {"h100", "NVIDIA H100 SXM", 989e12, 494.5e12, 67e12, 3.35e12, 450e9, 50e9, 8},
    {"a100", "NVIDIA A100 SXM 80GB", 312e12, 156e12, 19.5e12, 2.039e12, 300e9, 25e9, 8},
}};

// "h200, h100, a100".
inline std::string known_device_models() {
  std::string names;
  for (const DeviceModel& d : kDeviceModels) names += (names.empty() ? "" : ", ") + std::string(d.name);
  return names;
}

// The model named `name`, or null.
inline const DeviceModel* find_device_model(std::string_view name) {
  for (const DeviceModel& d : kDeviceModels)
    if (d.name == name) return &d;
  return nullptr;
}

// The model named `name`; throws kiln::Error "unknown device model 'x' (known: h200, h100, a100)".
inline const DeviceModel& device_model(std::string_view name) {
  if (const DeviceModel* d = find_device_model(name)) return *d;
  throw Error("unknown device model '{}' (known: {})", name, known_device_models());
}

// The configs' check of run.device_model (--device-model): empty, or a known model with a dry run;
// and of run.dry_run_json (--json), which needs the model. Throws kiln::Error naming the key.
inline void check_device_model_setting(const std::string& name, bool dry_run, bool json) {
  if (json && name.empty())
    throw Error("config: run.dry_run_json (--json) prints the expected step as JSON; add --dry-run --device-model");
  if (name.empty()) return;
  if (!find_device_model(name))
    throw Error("config: run.device_model (--device-model) '{}' is unknown; known: {}", name, known_device_models());
  if (!dry_run)
    throw Error("config: run.device_model (--device-model) prints the expected step of a dry run; add --dry-run");
}

}  // namespace kiln::train
