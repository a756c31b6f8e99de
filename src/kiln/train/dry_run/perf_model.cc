#include "kiln/train/dry_run/perf_model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace kiln::train {

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "GEMMs / convolutions";
    case OpClass::attention: return "attention core (unfused or fused: see the notes)";
    case OpClass::norm: return "LayerNorm / batch norm";
    case OpClass::elementwise: return "elementwise (GELU, dropout, bias, residual, ReLU)";
    case OpClass::loss: return "softmax / losses";
    case OpClass::embedding: return "embeddings / row gathers";
    case OpClass::optimizer: return "optimizer (f32 master, grads, state)";
    case OpClass::exchange: return "tensor / pipeline exchange";
    case OpClass::all_reduce: return "gradient all-reduce (DP)";
    case OpClass::bubble: return "pipeline bubble (1F1B)";
  }
  return "?";
}

const char* op_class_key(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::attention: return "attention";
    case OpClass::norm: return "norm";
    case OpClass::elementwise: return "elementwise";
    case OpClass::loss: return "loss";
    case OpClass::embedding: return "embedding";
    case OpClass::optimizer: return "optimizer";
    case OpClass::exchange: return "exchange";
    case OpClass::all_reduce: return "all_reduce";
    case OpClass::bubble: return "bubble";
  }
  return "?";
}

double StepModel::seconds() const {
  double s = 0;
  for (const OpCost& op : ops) s += op.total_seconds();
  return s;
}

void apply_roofline(std::vector<OpCost>& ops, const DeviceModel& device) {
  for (OpCost& op : ops) {
    const double link = op.network ? device.network : device.nvlink;
    op.seconds = std::max({op.flops / device.peak(op.math), op.bytes / device.hbm, op.link_bytes / link});
  }
}

namespace {

struct ClassSum {
  double calls = 0, flops = 0, bytes = 0, seconds = 0;
  void add(const OpCost& op) {
    calls += op.calls;
    flops += op.calls * op.flops;
    bytes += op.calls * (op.bytes + op.link_bytes);
    seconds += op.total_seconds();
  }
};

ClassSum sum_of(const std::vector<OpCost>& ops) {
  ClassSum s;
  for (const OpCost& op : ops) s.add(op);
  return s;
}

std::string row(const std::string& label, const ClassSum& s, double step) {
  return fmt::format("    {:<52}{:>8.0f}{:>11.1f}{:>11.2f}{:>10.2f}{:>8.1f}%\n", label, s.calls, s.flops / 1e9,
                     s.bytes / 1e9, s.seconds * 1e3, 100 * s.seconds / step);
}

const char* math_name(Math m) { return m == Math::tensor16 ? "bf16/f16 dense" : m == Math::tf32 ? "TF32 dense" : "f32"; }

double mfu(const StepModel& step, const DeviceModel& d, double seconds) {
  return step.model_flops / (double(step.world) * d.peak(step.mfu_math) * seconds);
}

std::string summary(const StepModel& step, const DeviceModel& d, double seconds) {
  const double peak = d.peak(step.mfu_math);
  return fmt::format("{:.2f} ms, {:.1f} samples/s (global batch {}), MFU {:.1f}% ({:.3e} model FLOPs over {} "
                     "rank{} at {:.0f} TFLOP/s {})",
                     seconds * 1e3, double(step.samples) / seconds, step.samples,
                     100 * mfu(step, d, seconds), step.model_flops, step.world,
                     step.world == 1 ? "" : "s", peak / 1e12, math_name(step.mfu_math));
}

}  // namespace

std::string format_step_table(const StepModel& step, const DeviceModel& d) {
  std::array<ClassSum, kOpClasses> classes{};
  for (const OpCost& op : step.ops) classes[size_t(op.cls)].add(op);
  const double total = step.seconds();
  std::string x = fmt::format(
      "  expected step on {} (--device-model {}): a roofline model at the datasheet's peaks, not a "
      "measurement\n    peaks: bf16/f16 dense {:.1f} TFLOP/s, f32 {:.1f} TFLOP/s, HBM {:.2f} TB/s, NVLink {:.0f} "
      "GB/s per direction\n",
      d.description, d.name, d.tensor16 / 1e12, d.fp32 / 1e12, d.hbm / 1e12, d.nvlink / 1e9);
  x += fmt::format("    {:<52}{:>8}{:>11}{:>11}{:>10}{:>9}\n", "op class", "ops", "GFLOP", "GB moved", "ms", "share");
  for (int c = 0; c < kOpClasses; ++c)
    if (classes[size_t(c)].calls > 0) x += row(op_class_name(OpClass(c)), classes[size_t(c)], total);
  x += row("step (rank with the most work)", sum_of(step.ops), total);
  x += "  expected step: " + summary(step, d, total) + "\n";
  if (!step.fused_attention.empty()) {
    const ClassSum fused = sum_of(step.fused_attention), &unfused = classes[size_t(OpClass::attention)];
    x += row("attention core fused (flash), instead of the above", fused, total);
    x += "  with it: " + summary(step, d, total - unfused.seconds + fused.seconds) + "\n";
  }
  for (const std::string& note : step.notes) x += "  note: " + note + "\n";
  return x;
}

std::string format_step_json(const StepModel& step, const DeviceModel& d) {
  const double seconds = step.seconds();
  nlohmann::ordered_json j{{"device", d.name},
                           {"step_ms", seconds * 1e3},
                           {"mfu", mfu(step, d, seconds)},
                           {"samples_per_s", double(step.samples) / seconds},
                           {"peak_tflops", d.tensor16 / 1e12},  // bf16 / f16 dense
                           {"hbm_gb_s", d.hbm / 1e9}};
  nlohmann::ordered_json& classes = j["classes"] = nlohmann::ordered_json::object();
  for (const OpCost& op : step.ops) {
    nlohmann::ordered_json& ms = classes[op_class_key(op.cls)];
    ms = (ms.is_null() ? 0.0 : ms.get<double>()) + op.total_seconds() * 1e3;
  }
  nlohmann::ordered_json& ops = j["ops"] = nlohmann::ordered_json::array();
  for (const OpCost& op : step.ops)
    ops.push_back({{"name", op.name}, {"shape", op.shape}, {"class", op_class_key(op.cls)}, {"calls", op.calls},
                   {"gflop", op.flops / 1e9}, {"gb", (op.bytes + op.link_bytes) / 1e9}, {"ms", op.seconds * 1e3}});
  return j.dump() + "\n";
}

std::string format_op_list(const StepModel& step) {
  std::string x = fmt::format("  {:<44}{:>7} {:>10}{:>10}{:>10}{:>10}  {}\n", "op", "calls", "GFLOP", "GB", "ms",
                              "total ms", "shape");
  for (const OpCost& op : step.ops)
    x += fmt::format("  {:<44}{:>7.0f} {:>10.3f}{:>10.4f}{:>10.4f}{:>10.3f}  {}\n", op.name, op.calls, op.flops / 1e9,
                     (op.bytes + op.link_bytes) / 1e9, op.seconds * 1e3, op.total_seconds() * 1e3, op.shape);
  return x;
}

}  // namespace kiln::train
