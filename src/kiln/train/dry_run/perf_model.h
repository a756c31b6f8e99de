// train/dry_run/perf_model.h — the performance model (issue 47, point 1): every op of a training step,
// the FLOPs it computes and the bytes it moves, and from them its expected time at a device's
// peak (a roofline):
//   time = max(flops / peak(math), bytes / HBM bandwidth)
// math: bf16 / f16 matrix products on the tensor cores, f32 ones on the CUDA cores (kiln's CUDA
// matmul uses CUBLAS_COMPUTE_32F, no TF32), row and elementwise ops at the f32 rate.
// Bytes: what an op must read and write in HBM, each operand once in its stored dtype (the compute
// dtype for activations, f32 for master weights, gradients, optimizer state, statistics and the
// attention scores), plus what kiln's fixed-order reductions write and read back (per-chunk
// partial sums). Two-pass ops (batch norm: statistics, then normalisation) read their input twice.
// Collectives: the bytes a ring all-reduce sends per GPU, 2 (n-1)/n x size, over the link's
// bandwidth per direction (train/dry_run/device_model.h): a lower bound, counted after backward as if
// nothing overlapped it.
// Left out: kernel launch and graph overheads, L2 reuse between ops, integer work (Philox dropout
// masks, index arithmetic), host work (data, logging), zero fills of bias / LayerNorm gradients,
// loss totals and the step's scalars, and SyncBN's per-layer all-reduces (latency-bound).
//
// The ops are those kiln runs (models/bert_stage.cc, nn/transformer.cc, nn/attention.cc,
// models/resnet.cc): perf_model_bert.cc and perf_model_resnet.cc say where each comes from and where
// kiln's CUDA backend does more than the model counts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/models/bert_config.h"
#include "kiln/models/resnet.h"
#include "kiln/train/dry_run/device_model.h"

namespace kiln::train {

enum class OpClass : unsigned char {
  gemm,         // matrix products and convolutions
  attention,    // the attention core: scores, softmax + dropout, context, and their backward
  norm,         // LayerNorm, batch norm (with their fused joins and ReLUs)
  elementwise,  // GELU, tanh, dropout, bias gradients, residual adds, ReLU, casts, pools, fills
  loss,         // softmax cross-entropy (masked LM, NSP, classification)
  embedding,    // embedding gathers and scatter-adds, row gathers of the heads
  optimizer,    // unscale, gradient norm, the optimizer's passes over f32 weights and state
  exchange,     // tensor-parallel all-reduces, pipeline sends
  all_reduce,   // data-parallel gradient reduction
  bubble,       // pipeline idle time (1F1B)
};
inline constexpr int kOpClasses = int(OpClass::bubble) + 1;
const char* op_class_name(OpClass c);
// The class as one word, the JSON's key: "gemm", "attention", ..., "all_reduce", "bubble".
const char* op_class_key(OpClass c);

// One op (or several identical ones: `calls` per step), costs per call.
struct OpCost {
  std::string name;   // "layer.query.forward"
  std::string shape;  // "(8192, 1024) x (1024, 1024)^T -> (8192, 1024) bf16"
  OpClass cls = OpClass::elementwise;
  Math math = Math::fp32;
  double calls = 1;         // per step, on this rank
  double flops = 0;         // per call
  double bytes = 0;         // per call, HBM reads + writes
  double link_bytes = 0;    // per call, sent per GPU over `link` (collectives)
  bool network = false;     // the link is the network between nodes, else NVLink
  bool model_flops = false; // counts toward the MFU's model FLOPs (not a recomputation)
  double seconds = 0;       // per call, expected at the device's peaks
  double total_seconds() const { return calls * seconds; }
};

// A step on the rank that takes longest (the busiest pipeline stage), at one device's peaks.
struct StepModel {
  std::vector<OpCost> ops;
  // BERT with the unfused attention core: the fused core's rows that would replace its rows,
  // timed on the same device; empty for ResNet and where the run takes the fused core.
  std::vector<OpCost> fused_attention;
  double model_flops = 0;  // matrix-product FLOPs of the whole step over every rank
  int64_t samples = 0;     // global batch
  int64_t world = 1;       // ranks
  Math mfu_math = Math::tensor16;
  std::vector<std::string> notes;  // assumptions, one line each
  double seconds() const;          // the sum of the ops' total_seconds
};

struct BertPerfRun {
  models::BertConfig model;  // vocab_size: the padded size the run allocates
  int64_t seq_length = 512, micro_batch = 1, global_batch = 1, max_predictions = 76;
  int tp = 1, pp = 1, chunks = 1, dp = 1;  // chunks: model chunks per stage (interleaved 1F1B)
  DType compute = DType::f32;
  bool lamb = true;  // else AdamW
  bool loss_scaling = false, distributed_optimizer = false;
};
struct ResNetPerfRun {
  models::ResNetConfig model;
  int64_t image = 224, batch = 1;  // batch per rank (one micro-batch)
  int dp = 1;
  DType compute = DType::f32;
  bool loss_scaling = false, distributed_optimizer = false;
};

// Throw kiln::Error for a layout the dry run refuses (bert_dry_run's checks).
StepModel bert_step_model(const BertPerfRun& run, const DeviceModel& device);
StepModel resnet_step_model(const ResNetPerfRun& run, const DeviceModel& device);

// Sets each op's seconds: roofline for compute ops, link time for collectives.
void apply_roofline(std::vector<OpCost>& ops, const DeviceModel& device);

// The table by op class (ops, GFLOP, GB moved, ms, share), the step total, samples/s and MFU,
// the fused-attention line and the notes; several lines ending in '\n'.
std::string format_step_table(const StepModel& step, const DeviceModel& device);
// The same expected step as one JSON object (--dry-run --device-model NAME --json), for scripts
// (tools/gpu_check.sh): {"device", "step_ms", "mfu", "samples_per_s", "classes": {key: ms per step},
// "ops": [{"name", "shape", "class", "calls", "gflop", "gb", "ms"}]} (ms per call for an op).
std::string format_step_json(const StepModel& step, const DeviceModel& device);
// One line per op: name, shape, calls, GFLOP, GB and ms per call, total ms.
std::string format_op_list(const StepModel& step);

}  // namespace kiln::train
