// The CUDA backend's multi-tensor bodies (optim_bodies.h) and their chunk table (chunk_plan.h),
// run on the CPU over the launches' grids: the table covers every segment element once, the norms
// match float64, and the AdamW / LAMB / LARS updates match the CPU backend over segments with
// gaps (left untouched).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/optim_bodies.h"
#include "kiln/backend/cuda/chunk_plan.h"
#include "kiln/backend/cuda/grid.h"
#include "cuda_bodies.h"
#include "random_fill.h"
#include "segments.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::max_rel_error;
using testing::random_normal;

// Segments of assorted sizes (one spans several chunks, one is empty) with 5-element gaps.
std::vector<ops::TensorSegment> make_segments(int64_t& total) {
  return testing::spaced_segments({1, 37, 3 * ops::kSumChunk + 11, 0, 1000}, total);
}

TEST(CudaBodies, ChunkPlanCoversEverySegmentElementOnce) {
  int64_t n = 0;
  const auto segs = make_segments(n);
  const ChunkPlan plan = plan_chunks(segs);
  std::vector<int> hits(size_t(n), 0);
  const int64_t quads = int64_t(plan.chunks.size()) * ops::kSumChunk / kQuad;
  run_all(quads, [&](int64_t item) {
    int32_t k = 0;
    const Quad q = slots_of(plan.chunks.data(), item, true, k);
    for (int64_t i = q.i; i < q.i + q.count; ++i) {
      ++hits[size_t(i)];
      const auto& s = segs[size_t(k)];
      ASSERT_TRUE(i >= s.offset && i < s.offset + s.numel) << i;
    }
  });
  std::vector<int> want(size_t(n), 0);
  for (const auto& s : segs)
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i) want[size_t(i)] = 1;
  EXPECT_EQ(hits, want);
  ASSERT_EQ(plan.segments.size(), segs.size());
  EXPECT_EQ(plan.segments[2].count, 4);
  EXPECT_EQ(plan.segments[3].count, 0);
  EXPECT_EQ(plan.segments[4].decay, 1);
}

// The lane sums' tree, as optim_ops.cc's segment_totals launches it, over `run_on`.
template <typename Runner>
std::vector<double> segment_totals(const ChunkPlan& plan, const std::vector<double>& partial, Runner run_on) {
  std::vector<double> group_sums(2 * plan.groups.size()), sums(2 * plan.segments.size());
  run_on(int64_t(plan.groups.size()), GroupTotalsBody{plan.groups.data(), partial.data(), group_sums.data()});
  run_on(int64_t(plan.segments.size()),
         SegmentTotalsBody{plan.segments.data(), group_sums.data(), sums.data(), true});
  return sums;
}
const auto kLaunchGrid = [](int64_t n, const auto& body) { run_all(n, body); };

// The lane pass and the per-segment totals, as optim_ops.cc launches them.
template <typename Runner>
std::vector<double> sum_squares(const ChunkPlan& plan, const float* a, const float* b, Runner run_on) {
  std::vector<double> partial(2 * plan.chunks.size() * kLanes);
  run_on(int64_t(plan.chunks.size()) * kLaneQuads, LaneSquaresBody{plan.chunks.data(), a, b, partial.data(), true});
  return segment_totals(plan, partial, run_on);
}

TEST(CudaBodies, SegmentSumSquaresMatchFloat64) {
  int64_t n = 0;
  const auto segs = make_segments(n);
  const std::vector<float> a = random_normal(n, 25), b = random_normal(n, 26, 0.1f);
  const std::vector<double> got = sum_squares(plan_chunks(segs), a.data(), b.data(), kLaunchGrid);
  for (size_t k = 0; k < segs.size(); ++k) {
    double sa = 0, sb = 0;
    for (int64_t i = segs[k].offset; i < segs[k].offset + segs[k].numel; ++i)
      sa += double(a[size_t(i)]) * a[size_t(i)], sb += double(b[size_t(i)]) * b[size_t(i)];
    EXPECT_NEAR(got[2 * k], sa, 1e-12 * sa) << k;
    EXPECT_NEAR(got[2 * k + 1], sb, 1e-12 * sb) << k;
  }
}

TEST(CudaBodies, SegmentSumSquaresDoNotDependOnTheGrid) {
  // A segment of 20 chunks: three groups (8, 8, 4), beside the assorted ones.
  int64_t n = 0;
  const auto segs = testing::spaced_segments({5, 20 * ops::kSumChunk - 3, 0, 3 * ops::kSumChunk}, n);
  const ChunkPlan plan = plan_chunks(segs);
  EXPECT_EQ(plan.segments[1].groups, 3);
  EXPECT_EQ(plan.groups[size_t(plan.segments[1].first_group) + 2].count, 4);
  const std::vector<float> a = random_normal(n, 27), b = random_normal(n, 28, 0.1f);
  const std::vector<double> got = sum_squares(plan, a.data(), b.data(), kLaunchGrid);
  EXPECT_EQ(sum_squares(plan, a.data(), b.data(), [](int64_t m, const auto& body) { run_narrow(m, body); }), got);
  double sa = 0;
  for (int64_t i = segs[1].offset; i < segs[1].offset + segs[1].numel; ++i)
    sa += double(a[size_t(i)]) * a[size_t(i)];
  EXPECT_NEAR(got[2], sa, 1e-12 * sa);
  EXPECT_EQ(got[4], 0.0);  // the empty segment
}

struct State {
  std::vector<float> w, g, m, v;
};
State make_state(int64_t n) {
  State s{random_normal(n, 27), random_normal(n, 28, 0.01f), random_normal(n, 29, 0.001f),
          random_normal(n, 30, 1e-6f)};
  for (float& x : s.v) x = std::abs(x);
  return s;
}
// Elements of two bf16 / f16 weight copies that differ: a w within 1e-6 of the CPU backend's
// may round to a neighbouring value.
int differing(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}
struct Views {
  Tensor w, g, m, v;
};
Views views(State& s) {
  auto view = [](std::vector<float>& x) { return Tensor::view(x.data(), {int64_t(x.size())}); };
  return {view(s.w), view(s.g), view(s.m), view(s.v)};
}

const ops::AdamStep kAdam{0.9f, 0.999f, 1e-6f, 0.01f};

// A step's scalars block (host memory stands for the device's): lr, bias corrections, factor.
std::vector<double> step_block(double lr, double bc1 = 1, double bc2 = 1, double factor = 1) {
  std::vector<double> s(ops::kStepScalars, 0.0);
  s[ops::kStepLr] = lr, s[ops::kStepBc1] = bc1, s[ops::kStepBc2] = bc2, s[ops::kStepGradFactor] = factor;
  return s;
}
Tensor block_view(std::vector<double>& s) { return Tensor::view(s.data(), {ops::kStepScalars}, DType::i64); }

TEST(CudaBodies, AdamWAndLambUpdatesMatchTheCpuBackend) {
  int64_t n = 0;
  const auto segs = make_segments(n);
  const ChunkPlan plan = plan_chunks(segs);
  std::vector<double> block = step_block(0.01, double(0.1f), double(0.002f), double(0.6f));
  const Tensor scalars = block_view(block);
  const AdamScalars adam{kAdam.beta1, kAdam.beta2, kAdam.eps, kAdam.weight_decay, block.data()};
  const int64_t slots = int64_t(plan.chunks.size()) * ops::kSumChunk / kQuad;
  // AdamW, with the bf16 copy refreshed.
  State got = make_state(n), want = make_state(n);
  std::vector<uint16_t> copy(size_t(n), 0), want_copy(size_t(n), 0);
  run_all(slots, AdamWBody{plan.chunks.data(), plan.segments.data(), adam, got.w.data(),
                           got.g.data(), got.m.data(), got.v.data(), FloatPtr{copy.data(), DType::bf16}, true});
  Tensor wc = Tensor::view(want_copy.data(), {n}, DType::bf16);
  Views t = views(want);
  ops::adamw_update(cpu_context(), kAdam, scalars, segs, t.w, t.g, t.m, t.v, wc);
  EXPECT_LE(max_rel_error(got.w, want.w), 1e-6);
  EXPECT_LE(max_rel_error(got.m, want.m), 1e-6);
  EXPECT_LE(max_rel_error(got.v, want.v), 1e-6);
  EXPECT_LE(differing(copy, want_copy), 2);
  // LAMB: moments with norms, then the update.
  got = make_state(n), want = make_state(n);
  std::vector<double> partial(2 * plan.chunks.size() * kLanes), norms(2 * segs.size());
  run_all(int64_t(plan.chunks.size()) * kLaneQuads,
          LambMomentsBody{plan.chunks.data(), plan.segments.data(), adam, got.w.data(), got.g.data(),
                          got.m.data(), got.v.data(), partial.data(), true});
  norms = segment_totals(plan, partial, kLaunchGrid);
  std::vector<double> want_norms(2 * segs.size());
  Tensor nt = Tensor::view(want_norms.data(), {int64_t(segs.size()), 2}, DType::i64);
  t = views(want);
  ops::lamb_moments(cpu_context(), kAdam, scalars, segs, t.w, Tensor{}, t.g, t.m, t.v, nt);
  EXPECT_LE(max_rel_error(norms, want_norms), 1e-9);
  std::vector<float> step(segs.size());
  run_all(int64_t(segs.size()), LambRatioBody{norms.data(), block.data(), step.data()});
  run_all(slots, LambUpdateBody{plan.chunks.data(), plan.segments.data(), adam, step.data(),
                                got.w.data(), got.m.data(), got.v.data(), FloatPtr{}, true});
  Tensor none;
  ops::lamb_update(cpu_context(), kAdam, scalars, segs, nt, t.w, t.m, t.v, none);
  EXPECT_LE(max_rel_error(got.w, want.w), 1e-6);
}

TEST(CudaBodies, LarsUpdateMatchesTheCpuBackend) {
  int64_t n = 0;
  const auto segs = make_segments(n);
  const ChunkPlan plan = plan_chunks(segs);
  const ops::LarsStep p{0.9f, 5e-5f, 0.001f, 1e-9f};
  std::vector<double> block = step_block(0.5);
  State got = make_state(n), want = make_state(n);
  const std::vector<double> norms = sum_squares(plan, got.w.data(), got.g.data(), kLaunchGrid);
  std::vector<float> step(segs.size());
  run_all(int64_t(segs.size()), LarsRatioBody{plan.segments.data(), norms.data(), block.data(),
                                              p.weight_decay, p.eeta, p.epsilon, step.data()});
  std::vector<uint16_t> copy(size_t(n), 0), want_copy(size_t(n), 0);
  run_all(int64_t(plan.chunks.size()) * ops::kSumChunk / kQuad,
          LarsUpdateBody{plan.chunks.data(), plan.segments.data(), block.data(), step.data(), p.momentum,
                         p.weight_decay, got.w.data(), got.g.data(), got.m.data(),
                         FloatPtr{copy.data(), DType::f16}, true});
  std::vector<double> want_norms = norms;
  Tensor nt = Tensor::view(want_norms.data(), {int64_t(segs.size()), 2}, DType::i64);
  Tensor wc = Tensor::view(want_copy.data(), {n}, DType::f16);
  Views t = views(want);
  ops::lars_update(cpu_context(), p, block_view(block), segs, nt, t.w, t.g, t.m, wc);
  EXPECT_LE(max_rel_error(got.w, want.w), 1e-6);
  EXPECT_LE(max_rel_error(got.m, want.m), 1e-6);
  EXPECT_LE(differing(copy, want_copy), 2);
}

TEST(CudaBodies, StepScalarBodiesMatchTheCpuBackend) {
  std::vector<float> x = random_normal(5000, 31), want = x;
  std::vector<double> block = step_block(0.1), cpu_block = block;
  block[ops::kStepUnscale] = cpu_block[ops::kStepUnscale] = 1.0 / 3;
  run_all(5000, ScaleByScalarBody{x.data(), block.data(), ops::kStepUnscale});
  Tensor xt = Tensor::view(want.data(), {5000});
  ops::scale_by_step_scalar(cpu_context(), xt, block_view(cpu_block), ops::kStepUnscale);
  EXPECT_EQ(x, want);
  const std::vector<double> sums = {2.0, 3.0, 5.0};
  const std::vector<int32_t> owners = {1, 0, 1};
  block[ops::kStepMaxNorm] = cpu_block[ops::kStepMaxNorm] = 2.0;
  run_all(1, StepNormSquaresBody{sums.data(), owners.data(), 3, block.data()});
  run_all(1, StepDecideBody{block.data()});
  Tensor cpu_scalars = block_view(cpu_block);
  ops::step_norm_squares(cpu_context(), Tensor::view(const_cast<double*>(sums.data()), {3}, DType::i64),
                         Tensor::view(const_cast<int32_t*>(owners.data()), {3}, DType::i32), cpu_scalars);
  ops::step_decide(cpu_context(), cpu_scalars);
  EXPECT_EQ(block, cpu_block);
  EXPECT_EQ(block[ops::kStepNormSquares], 7.0);
  EXPECT_EQ(block[ops::kStepGradFactor], double(float(2.0 / std::sqrt(7.0))));
}

TEST(CudaBodies, StepNormSquaresOverManySegmentsAreTheCpuBackends) {
  // 390 segments (BERT-large's), every third owned elsewhere.
  const int64_t n = 390;
  const std::vector<float> r = random_normal(n, 32, 100.0f);
  std::vector<double> sums(static_cast<size_t>(n));
  std::vector<int32_t> owners(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    sums[size_t(k)] = double(r[size_t(k)]) * r[size_t(k)] / 3.0;
    owners[size_t(k)] = k % 3 != 2;
  }
  std::vector<double> block = step_block(0.1), cpu_block = block;
  run_all(1, StepNormSquaresBody{sums.data(), owners.data(), n, block.data()});
  Tensor cpu_scalars = block_view(cpu_block);
  ops::step_norm_squares(cpu_context(), Tensor::view(sums.data(), {n}, DType::i64),
                         Tensor::view(owners.data(), {n}, DType::i32), cpu_scalars);
  EXPECT_EQ(block[ops::kStepNormSquares], cpu_block[ops::kStepNormSquares]);
  EXPECT_GT(block[ops::kStepNormSquares], 0.0);
}

TEST(CudaBodies, SkippedStepLeavesStateAlone) {
  int64_t n = 0;
  const auto segs = make_segments(n);
  const ChunkPlan plan = plan_chunks(segs);
  std::vector<double> block = step_block(0.01, 0.1, 0.002);
  block[ops::kStepSkip] = 1.0;
  const AdamScalars adam{kAdam.beta1, kAdam.beta2, kAdam.eps, kAdam.weight_decay, block.data()};
  State got = make_state(n);
  const State before = got;
  std::vector<double> partial(2 * plan.chunks.size() * kLanes, -1.0);
  const int64_t slots = int64_t(plan.chunks.size()) * ops::kSumChunk / kQuad;
  run_all(slots, AdamWBody{plan.chunks.data(), plan.segments.data(), adam, got.w.data(), got.g.data(),
                           got.m.data(), got.v.data(), FloatPtr{}, true});
  run_all(int64_t(plan.chunks.size()) * kLaneQuads,
          LambMomentsBody{plan.chunks.data(), plan.segments.data(), adam, got.w.data(), got.g.data(),
                          got.m.data(), got.v.data(), partial.data(), true});
  std::vector<float> step(segs.size(), 1.0f);
  run_all(slots, LambUpdateBody{plan.chunks.data(), plan.segments.data(), adam, step.data(), got.w.data(),
                                got.m.data(), got.v.data(), FloatPtr{}, true});
  run_all(slots, LarsUpdateBody{plan.chunks.data(), plan.segments.data(), block.data(), step.data(), 0.9f,
                                0.0f, got.w.data(), got.g.data(), got.m.data(), FloatPtr{}, true});
  EXPECT_EQ(got.w, before.w);
  EXPECT_EQ(got.m, before.m);
  EXPECT_EQ(got.v, before.v);
  for (double x : partial) ASSERT_EQ(x, 0.0);
}

}  // namespace
}  // namespace kiln
