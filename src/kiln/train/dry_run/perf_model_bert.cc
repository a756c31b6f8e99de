// bert_step_model (train/dry_run/perf_model.h): every pipeline stage's ops on one tensor-parallel rank for
// a whole step (its micro-batches, the optimizer, the collectives), the busiest stage kept.
#include <fmt/format.h>

#include "kiln/core/error.h"
#include "kiln/train/dry_run/dry_run.h"
#include "kiln/train/dry_run/perf_bert.h"

namespace kiln::train {
namespace {

using perf::BertShapes;
using perf::Ops;

BertShapes shapes(const BertPerfRun& r, int64_t microbatches) {
  const models::BertConfig& c = r.model;
  BertShapes s;
  s.B = r.micro_batch, s.S = r.seq_length, s.N = s.B * s.S, s.H = c.hidden;
  s.heads = c.heads / r.tp, s.d = c.hidden / c.heads, s.w = s.heads * s.d;
  s.I = c.intermediate / r.tp, s.V = c.vocab_size / r.tp;
  s.max_position = c.max_position, s.type_vocab = c.type_vocab;
  s.M = r.micro_batch * (r.max_predictions > 0 ? r.max_predictions : (r.seq_length * 15 + 50) / 100);
  s.tp = r.tp;
  s.dtype = r.compute, s.e = double(dtype_size(r.compute));
  s.pre_ln = c.pre_ln, s.hidden_dropout = c.hidden_dropout > 0, s.attention_dropout = c.attention_dropout > 0;
  s.recompute = c.recompute_attention, s.binary_head = c.binary_head;
  s.dw_accumulate = double(microbatches - 1) / double(microbatches);
  return s;
}

// Parameters one rank of a stage holds (as train/dry_run/dry_run.cc counts them).
double stage_parameters(const BertPerfRun& r, bool first, bool last) {
  const models::BertConfig& c = r.model;
  const double h = double(c.hidden), I = double(c.intermediate), V = double(c.vocab_size), t = double(r.tp);
  const double layer = (3 * h * h + 3 * h) / t + h * h / t + h + (h * I + I) / t + I * h / t + h + 4 * h;
  double p = double(c.layers / r.pp) * layer;
  if (first) p += V / t * h + double(c.max_position + c.type_vocab) * h + (c.pre_ln ? 0 : 2 * h);
  if (last) {
    p += (h * h + h) + 2 * h + V / t + (c.pre_ln ? 2 * h : 0);
    if (c.binary_head) p += (h * h + h) + (2 * h + 2);
    if (!first) p += V / t * h;  // the decoder's copy of the word embedding
  }
  return p;
}

// Unscale (with loss scaling), the gradient norm, the optimizer's passes over f32 master weights,
// gradients and state (the compute copy refreshed in the last pass), on this rank's shard.
void optimizer(const BertPerfRun& r, double params, Ops& ops) {
  const double shard = r.distributed_optimizer ? params / r.dp : params;
  const double copy = r.compute == DType::f32 ? 0 : double(dtype_size(r.compute));
  const std::string all = perf::dims({int64_t(params)}, DType::f32), part = perf::dims({int64_t(shard)}, DType::f32);
  if (r.loss_scaling) ops.push_back(perf::rows("optimizer.unscale", OpClass::optimizer, 1, all, params, 8 * params));
  ops.push_back(perf::rows("optimizer.grad_norm", OpClass::optimizer, 1, all, 2 * params, 4 * params));
  if (r.lamb) {
    // w, g, m, v read; m, v written; then w, m, v read, w and the copy written.
    ops.push_back(perf::rows("optimizer.lamb_moments", OpClass::optimizer, 1, part, 14 * shard, 24 * shard));
    ops.push_back(perf::rows("optimizer.lamb_update", OpClass::optimizer, 1, part, 10 * shard, (16 + copy) * shard));
  } else {
    ops.push_back(perf::rows("optimizer.adamw_update", OpClass::optimizer, 1, part, 16 * shard, (28 + copy) * shard));
  }
}

struct Stage {
  Ops ops, fused;
  double micro_seconds = 0;  // one micro-batch's forward and backward
  double seconds() const {
    double s = 0;
    for (const OpCost& op : ops) s += op.total_seconds();
    return s;
  }
};

// Whether the run's layers take the fused attention core on a GPU (nn/attention_core.h).
bool takes_fused(const BertPerfRun& r) {
  return nn::chosen_core(r.model.attention_core, true, r.compute, r.model.hidden / r.model.heads) ==
         nn::AttentionCore::fused;
}

// The unfused core's rows (forward, backward, recomputations) replaced by the fused core's for
// `calls` layers, with the forward again for `recomputed` layers (full recomputation).
void use_fused_core(const BertShapes& s, Ops& ops, double calls, double recomputed) {
  std::erase_if(ops, [](const OpCost& op) { return op.cls == OpClass::attention; });
  const Ops fused = perf::fused_attention(s, calls);
  ops.insert(ops.end(), fused.begin(), fused.end());
  if (recomputed == 0) return;
  OpCost again = perf::fused_attention(s, recomputed).front();
  again.name = "recompute." + again.name, again.model_flops = false;
  ops.push_back(again);
}

Stage stage_ops(const BertPerfRun& r, int stage, const DeviceModel& device) {
  const int64_t m = r.global_batch / (r.micro_batch * r.dp), layers = r.model.layers / r.pp;
  const bool first = stage == 0, last = stage == r.pp - 1;
  const BertShapes s = shapes(r, m);
  Stage st;
  if (first) perf::embeddings(s, st.ops, double(m), last);
  perf::layer_forward(s, st.ops, double(m * layers));
  perf::layer_backward(s, st.ops, double(m * layers));
  const int64_t recomputed = r.chunks * models::recompute_layout(r.model, layers / r.chunks).recomputed();
  if (recomputed > 0) {
    Ops again;  // full recomputation: the recomputed layers' forward once more
    perf::layer_forward(s, again, double(m * recomputed));
    for (OpCost& op : again) op.name = "recompute." + op.name, op.model_flops = false;
    st.ops.insert(st.ops.end(), again.begin(), again.end());
  }
  const bool fused = takes_fused(r);
  if (fused) use_fused_core(s, st.ops, double(m * layers), double(m * recomputed));
  if (last) perf::heads(s, st.ops, double(m));
  const std::string act = perf::dims({s.N, s.H}, s.dtype);
  // Interleaved, every chunk but the last virtual stage sends on (V m sends; V m - m on the last
  // rank), every chunk but the first receives.
  const double sends = double(m) * (r.chunks - (last ? 1 : 0)), receives = double(m) * (r.chunks - (first ? 1 : 0));
  if (sends > 0) st.ops.push_back(perf::send("pp.send_activations", sends, act, double(s.N * s.H) * s.e));
  if (receives > 0) st.ops.push_back(perf::send("pp.send_input_grad", receives, act, double(s.N * s.H) * s.e));
  apply_roofline(st.ops, device);
  for (const OpCost& op : st.ops) st.micro_seconds += op.total_seconds() / double(m);
  const double params = stage_parameters(r, first, last);
  Ops tail;
  optimizer(r, params, tail);
  perf::data_parallel(tail, params, r.dp, r.distributed_optimizer, int64_t(r.tp) * r.dp > device.node_gpus);
  apply_roofline(tail, device);
  st.ops.insert(st.ops.end(), tail.begin(), tail.end());
  if (!fused) {  // what the fused core would take instead, for the report
    st.fused = perf::fused_attention(s, double(m * layers));
    apply_roofline(st.fused, device);
  }
  return st;
}

void check_layout(const BertPerfRun& r) {
  // bert_dry_run refuses what kiln cannot lay out, naming the setting.
  (void)bert_dry_run(r.model, r.seq_length, r.micro_batch, r.global_batch, r.tp, r.pp, r.dp, r.compute,
                     r.max_predictions, false, false, r.chunks);
  if (r.model.vocab_size % r.tp != 0)
    throw Error("performance model: vocab size {} is not divisible by tensor model parallel size {}",
                r.model.vocab_size, r.tp);
}

double model_flops(const Ops& ops) {
  double f = 0;
  for (const OpCost& op : ops)
    if (op.model_flops) f += op.calls * op.flops;
  return f;
}

std::vector<std::string> notes(const BertPerfRun& r, const DeviceModel& d, int busiest) {
  std::vector<std::string> n;
  const std::string core = takes_fused(r) ? "attention fused: no S x S in HBM"
                                           : fmt::format("attention unfused: f32 S x S scores and {} probabilities in HBM",
                                                         dtype_name(r.compute));
  n.push_back(fmt::format("per rank: TP {} x PP {} x DP {}{}; {}; Q, K, V one batched product", r.tp, r.pp, r.dp,
                          r.pp > 1 ? fmt::format(", the busiest stage ({})", busiest) : "", core));
  if (r.tp * r.pp * r.dp > 1)
    n.push_back(fmt::format("collectives: rings over NVLink at {:.0f} GB/s per direction (the data-parallel one at {:.0f} "
                            "GB/s per GPU over the network beyond {} GPUs), pipeline sends over NVLink; not "
                            "overlapped with compute: a lower bound for each",
                            d.nvlink / 1e9, d.network / 1e9, d.node_gpus));
  return n;
}

}  // namespace

StepModel bert_step_model(const BertPerfRun& r, const DeviceModel& device) {
  check_layout(r);
  StepModel step;
  int busiest = 0;
  std::vector<Stage> stages;
  BertPerfRun whole = r;  // the model FLOPs once: tensor-parallel ranks replicate the heads' products
  whole.tp = 1;
  for (int p = 0; p < r.pp; ++p) {
    stages.push_back(stage_ops(r, p, device));
    step.model_flops += model_flops(stage_ops(whole, p, device).ops) * r.dp;
    if (stages.back().seconds() > stages[size_t(busiest)].seconds()) busiest = p;
  }
  Stage& st = stages[size_t(busiest)];
  step.ops = std::move(st.ops);
  step.fused_attention = std::move(st.fused);
  if (r.pp > 1) {  // 1F1B: pp - 1 micro-batch slots of forward and backward idle, 1 / chunks as long interleaved
    OpCost bubble = perf::rows("pp.bubble", OpClass::bubble, 1,
                               r.chunks > 1 ? fmt::format("{} stages x {} chunks", r.pp, r.chunks)
                                            : fmt::format("{} stages", r.pp), 0, 0);
    bubble.seconds = double(r.pp - 1) * st.micro_seconds / double(r.chunks);
    step.ops.push_back(bubble);
  }
  step.samples = r.global_batch;
  step.world = int64_t(r.tp) * r.pp * r.dp;
  step.mfu_math = perf::matmul_math(r.compute);
  step.notes = notes(r, device, busiest);
  return step;
}

}  // namespace kiln::train
