// backend/cuda/optim_ops.cc — the multi-tensor norms, gradient scaling, the step's decisions and
// the fused AdamW / LAMB / LARS updates on CUDA: checks, then bodies of optim_bodies.h over the segments' chunk table.
// The table of a segment list is uploaded once and kept, so that a steady-state step copies
// nothing from the host (and can be captured in a CUDA graph).
#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/chunk_plan.h"
#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

// Split master weights (u16 low halves beside a bf16 copy) are the CPU backend's alone:
// nn/params.h splits them only on the host.
void expect_unsplit(const char* op, const Tensor& w) {
  KILN_CHECK(w.dtype != DType::u16, "op {}: split master weights are for the CPU backend only", op);
}

// A segment list's chunk table in device memory, kept for the process.
struct DevicePlan {
  const Chunk* chunks = nullptr;
  const SegmentChunks* segments = nullptr;
  const ChunkGroup* groups = nullptr;
  int64_t chunk_count = 0, group_count = 0;
};

// The plan's three tables in one device allocation.
DevicePlan upload(const ChunkPlan& plan) {
  const size_t chunk_bytes = plan.chunks.size() * sizeof(Chunk);
  const size_t segment_bytes = plan.segments.size() * sizeof(SegmentChunks);
  const size_t group_bytes = plan.groups.size() * sizeof(ChunkGroup);
  void* mem = nullptr;
  check(cudaMalloc(&mem, chunk_bytes + segment_bytes + group_bytes + 1), "chunk table");
  auto* bytes = static_cast<std::byte*>(mem);
  check(cudaMemcpy(bytes, plan.chunks.data(), chunk_bytes, cudaMemcpyHostToDevice), "chunk table");
  check(cudaMemcpy(bytes + chunk_bytes, plan.segments.data(), segment_bytes, cudaMemcpyHostToDevice),
        "chunk table");
  check(cudaMemcpy(bytes + chunk_bytes + segment_bytes, plan.groups.data(), group_bytes,
                   cudaMemcpyHostToDevice),
        "chunk table");
  return {reinterpret_cast<const Chunk*>(bytes), reinterpret_cast<const SegmentChunks*>(bytes + chunk_bytes),
          reinterpret_cast<const ChunkGroup*>(bytes + chunk_bytes + segment_bytes), int64_t(plan.chunks.size()),
          int64_t(plan.groups.size())};
}

const DevicePlan& device_plan(const Context& ctx, std::span<const TensorSegment> segments) {
  static std::mutex mu;
  static auto* plans = new std::map<std::vector<int64_t>, DevicePlan>;  // never destroyed
  std::vector<int64_t> key{ctx.device.index};
  for (const TensorSegment& s : segments) key.insert(key.end(), {s.offset, s.numel, int64_t(s.decay)});
  const std::lock_guard lock(mu);
  auto it = plans->find(key);
  if (it != plans->end()) return it->second;
  return plans->emplace(std::move(key), upload(plan_chunks(segments))).first->second;
}

// The bf16 / f16 weight copy to refresh, or a null FloatPtr.
FloatPtr compute_copy(const Tensor& w_compute) {
  if (!w_compute.defined()) return {};
  return {w_compute.data, w_compute.dtype};
}

// The step's scalars block on the device.
double* step_scalars(const Tensor& scalars) {
  return reinterpret_cast<double*>(scalars.data);
}

AdamScalars adam_scalars(const AdamStep& p, const Tensor& scalars) {
  return {p.beta1, p.beta2, p.eps, p.weight_decay, step_scalars(scalars)};
}

// Scratch for the lane sums of a plan: two doubles per lane.
double* lane_partials(Context& ctx, Tensor& holder, const DevicePlan& plan) {
  holder = ctx.scratch_tensor({std::max<int64_t>(1, 2 * plan.chunk_count * kLanes)}, DType::i64);
  return reinterpret_cast<double*>(holder.data);
}

// The lane sums' tree (optim_bodies.h): per group of chunks, then per segment into sums.
void segment_totals(Context& ctx, const char* op, const DevicePlan& plan, const double* partial,
                    size_t segments, double* sums, bool pairs) {
  Tensor group_sums = ctx.scratch_tensor({std::max<int64_t>(1, 2 * plan.group_count)}, DType::i64);
  double* g = reinterpret_cast<double*>(group_sums.data);
  run(ctx, op, plan.group_count, GroupTotalsBody{plan.groups, partial, g});
  run(ctx, op, int64_t(segments), SegmentTotalsBody{plan.segments, g, sums, pairs});
}

// Per-segment f32 step sizes in scratch.
float* segment_steps(Context& ctx, Tensor& holder, size_t segments) {
  holder = ctx.scratch_tensor({std::max<int64_t>(1, int64_t(segments))}, DType::f32);
  return holder.ptr<float>();
}

}  // namespace

// a_high: the high halves of split master weights, which expect_unsplit turns away.
void segment_sum_squares(Context& ctx, const Tensor& a, const Tensor& b,
                         std::span<const TensorSegment> segments, Tensor& sums, const Tensor& /*a_high*/) {
  const char* op = "segment_sum_squares";
  expect_unsplit(op, a);
  const OpScope scope = expect_cuda(ctx, op, {&a, &b, &sums});
  const ScratchScope own_scratch(ctx);
  const DevicePlan& plan = device_plan(ctx, segments);
  Tensor holder;
  double* partial = lane_partials(ctx, holder, plan);
  const float *ap = a.ptr<float>(), *bp = b.defined() ? b.ptr<float>() : nullptr;
  run(ctx, op, plan.chunk_count * kLaneQuads, LaneSquaresBody{plan.chunks, ap, bp, partial, packs_aligned(ap, bp)});
  segment_totals(ctx, op, plan, partial, segments.size(), reinterpret_cast<double*>(sums.data), b.defined());
}

void scale_all(Context& ctx, Tensor& x, float factor) {
  const OpScope scope = expect_cuda(ctx, "scale_all", {&x});
  float* p = x.ptr<float>();
  run_spans(ctx, "scale_all", ScaleBody<float, float>{p, p, x.numel(), packs_aligned(p), Scaled{factor}});
}

void scale_by_step_scalar(Context& ctx, Tensor& x, const Tensor& scalars, StepScalar slot) {
  const char* op = "scale_by_step_scalar";
  const OpScope scope = expect_cuda(ctx, op, {&x, &scalars});
  run(ctx, op, x.numel(), ScaleByScalarBody{x.ptr<float>(), step_scalars(scalars), int(slot)});
}

void step_norm_squares(Context& ctx, const Tensor& sums, const Tensor& owners, Tensor& scalars) {
  const char* op = "step_norm_squares";
  const OpScope scope = expect_cuda(ctx, op, {&sums, &owners, &scalars});
  run(ctx, op, 1,
      StepNormSquaresBody{reinterpret_cast<const double*>(sums.data), owners.ptr<int32_t>(), owners.numel(),
                          step_scalars(scalars)});
}

void step_decide(Context& ctx, Tensor& scalars) {
  const char* op = "step_decide";
  const OpScope scope = expect_cuda(ctx, op, {&scalars});
  run(ctx, op, 1, StepDecideBody{step_scalars(scalars)});
}

void adamw_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  Tensor& w, const Tensor& g, Tensor& m, Tensor& v, Tensor& w_compute) {
  const char* op = "adamw_update";
  expect_unsplit(op, w);
  const OpScope scope = expect_cuda(ctx, op, {&scalars, &w, &g, &m, &v, &w_compute});
  const FloatPtr compute = compute_copy(w_compute);
  const DevicePlan& plan = device_plan(ctx, segments);
  float *wp = w.ptr<float>(), *mp = m.ptr<float>(), *vp = v.ptr<float>();
  const float* gp = g.ptr<float>();
  run(ctx, op, plan.chunk_count * kSumChunk / kQuad,
      AdamWBody{plan.chunks, plan.segments, adam_scalars(p, scalars), wp, gp, mp, vp, compute,
                packs_aligned(wp, gp, mp, vp)});
}

void lamb_moments(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                  const Tensor& w, const Tensor& /*w_compute*/, const Tensor& g, Tensor& m, Tensor& v,
                  Tensor& norms) {
  const char* op = "lamb_moments";
  expect_unsplit(op, w);
  const OpScope scope = expect_cuda(ctx, op, {&scalars, &w, &g, &m, &v, &norms});
  const ScratchScope own_scratch(ctx);
  const DevicePlan& plan = device_plan(ctx, segments);
  Tensor holder;
  double* partial = lane_partials(ctx, holder, plan);
  const float *wp = w.ptr<float>(), *gp = g.ptr<float>();
  float *mp = m.ptr<float>(), *vp = v.ptr<float>();
  run(ctx, op, plan.chunk_count * kLaneQuads,
      LambMomentsBody{plan.chunks, plan.segments, adam_scalars(p, scalars), wp, gp, mp, vp, partial,
                      packs_aligned(wp, gp, mp, vp)});
  segment_totals(ctx, op, plan, partial, segments.size(), reinterpret_cast<double*>(norms.data), true);
}

void lamb_update(Context& ctx, const AdamStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& m, const Tensor& v, Tensor& w_compute) {
  const char* op = "lamb_update";
  expect_unsplit(op, w);
  const OpScope scope = expect_cuda(ctx, op, {&scalars, &norms, &w, &m, &v, &w_compute});
  const ScratchScope own_scratch(ctx);
  const FloatPtr compute = compute_copy(w_compute);
  const DevicePlan& plan = device_plan(ctx, segments);
  const AdamScalars adam = adam_scalars(p, scalars);
  Tensor holder;
  float* step = segment_steps(ctx, holder, segments.size());
  run(ctx, op, int64_t(segments.size()),
      LambRatioBody{reinterpret_cast<const double*>(norms.data), adam.scalars, step});
  float* wp = w.ptr<float>();
  const float *mp = m.ptr<float>(), *vp = v.ptr<float>();
  run(ctx, op, plan.chunk_count * kSumChunk / kQuad,
      LambUpdateBody{plan.chunks, plan.segments, adam, step, wp, mp, vp, compute, packs_aligned(wp, mp, vp)});
}

void lars_update(Context& ctx, const LarsStep& p, const Tensor& scalars, std::span<const TensorSegment> segments,
                 const Tensor& norms, Tensor& w, const Tensor& g, Tensor& momentum, Tensor& w_compute) {
  const char* op = "lars_update";
  expect_unsplit(op, w);
  const OpScope scope = expect_cuda(ctx, op, {&scalars, &norms, &w, &g, &momentum, &w_compute});
  const ScratchScope own_scratch(ctx);
  const FloatPtr compute = compute_copy(w_compute);
  const DevicePlan& plan = device_plan(ctx, segments);
  const double* values = step_scalars(scalars);
  Tensor holder;
  float* step = segment_steps(ctx, holder, segments.size());
  run(ctx, op, int64_t(segments.size()),
      LarsRatioBody{plan.segments, reinterpret_cast<const double*>(norms.data), values, p.weight_decay, p.eeta,
                    p.epsilon, step});
  float *wp = w.ptr<float>(), *vel = momentum.ptr<float>();
  const float* gp = g.ptr<float>();
  run(ctx, op, plan.chunk_count * kSumChunk / kQuad,
      LarsUpdateBody{plan.chunks, plan.segments, values, step, p.momentum, p.weight_decay, wp, gp, vel, compute,
                     packs_aligned(wp, gp, vel)});
}

}  // namespace kiln::ops::cuda
