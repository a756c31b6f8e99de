// The multi-tensor bodies' float4 paths (optim_bodies.h: an update item takes four element slots,
// a lane item four lanes) run on the CPU over their launch's grid, bitwise against the element
// by element loops they replace (each element's formulas as AdamScalars has them, each lane's sum
// in its order), over segments at offsets that are and are not 16-byte boundaries, with the
// buffers aligned and not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/chunk_plan.h"
#include "kiln/backend/cuda/optim_bodies.h"
#include "cuda_bodies.h"
#include "random_fill.h"
#include "segments.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::random_normal;

// w, g, m, v of n elements at `shift` floats into their storage (1: none 16-byte aligned).
struct Buffers {
  std::vector<float> w, g, m, v;
  int64_t shift;
  Buffers(int64_t n, int64_t shift_) : shift(shift_) {
    auto fill = [&](uint32_t id, float scale) { return random_normal(n + shift, id, scale); };
    w = fill(51, 1.0f), g = fill(52, 0.01f), m = fill(53, 0.001f), v = fill(54, 1e-6f);
    for (float& x : v) x = std::abs(x);
  }
  float* at(std::vector<float>& x) { return x.data() + shift; }
  bool aligned() { return packs_aligned(at(w), at(g), at(m), at(v)); }
};

// Segments at offsets 3, 9, 51, 1068, 33848, 33853 (spaced_segments): the chunks at 1068 (three,
// the last ending mid-quad) start on a 4-element boundary, the others do not.
std::vector<ops::TensorSegment> segments(int64_t& n) {
  return testing::spaced_segments({1, 37, 1012, 2 * ops::kSumChunk + 7, 0, 4096}, n);
}

// Each element of each segment: f(i, segment).
template <typename Fn>
void each_element(const std::vector<ops::TensorSegment>& segs, Fn f) {
  for (size_t k = 0; k < segs.size(); ++k)
    for (int64_t i = segs[k].offset; i < segs[k].offset + segs[k].numel; ++i) f(i, int32_t(k));
}

TEST(CudaQuads, UpdatesAreTheElementLoopsBitForBit) {
  int64_t n = 0;
  const auto segs = segments(n);
  const ChunkPlan plan = plan_chunks(segs);
  const int64_t quads = int64_t(plan.chunks.size()) * ops::kSumChunk / kQuad;
  std::vector<double> block(ops::kStepScalars, 0.0);
  block[ops::kStepLr] = 0.01, block[ops::kStepBc1] = 0.1, block[ops::kStepBc2] = 0.002;
  block[ops::kStepGradFactor] = 0.6;
  const AdamScalars adam{0.9f, 0.999f, 1e-6f, 0.01f, block.data()};
  std::vector<float> step(segs.size());
  for (size_t k = 0; k < step.size(); ++k) step[k] = 0.01f * float(k + 1);
  int packed_runs = 0;
  for (int64_t shift : {0, 1}) {
    Buffers got(n, shift), want(n, shift);
    const bool aligned = got.aligned();
    packed_runs += aligned;
    std::vector<uint16_t> copy(size_t(n + shift)), want_copy(copy.size());
    const FloatPtr compute{copy.data() + shift, DType::bf16};
    run_all(quads, AdamWBody{plan.chunks.data(), plan.segments.data(), adam, got.at(got.w), got.at(got.g),
                             got.at(got.m), got.at(got.v), compute, aligned});
    float *w = want.at(want.w), *g = want.at(want.g), *m = want.at(want.m), *v = want.at(want.v);
    each_element(segs, [&](int64_t i, int32_t k) {
      adam.moments(g[i], m[i], v[i]);
      w[i] -= float(block[ops::kStepLr]) * adam.direction(m[i], v[i], w[i], segs[size_t(k)].decay);
      want_copy[size_t(i + shift)] = store<bf16_t>(w[i]).bits;
    });
    EXPECT_TRUE(same_bits(got.w, want.w) && same_bits(got.m, want.m) && same_bits(got.v, want.v)) << shift;
    EXPECT_TRUE(same_bits(copy, want_copy)) << shift;

    run_all(quads, LambUpdateBody{plan.chunks.data(), plan.segments.data(), adam, step.data(), got.at(got.w),
                                  got.at(got.m), got.at(got.v), FloatPtr{}, aligned});
    each_element(segs, [&](int64_t i, int32_t k) {
      w[i] -= step[size_t(k)] * adam.direction(m[i], v[i], w[i], segs[size_t(k)].decay);
    });
    EXPECT_TRUE(same_bits(got.w, want.w)) << shift;

    run_all(quads, LarsUpdateBody{plan.chunks.data(), plan.segments.data(), block.data(), step.data(), 0.9f,
                                  5e-5f, got.at(got.w), got.at(got.g), got.at(got.m), FloatPtr{}, aligned});
    each_element(segs, [&](int64_t i, int32_t k) {
      const float wd = segs[size_t(k)].decay ? 5e-5f : 0.0f;
      m[i] = 0.9f * m[i] + step[size_t(k)] * (g[i] + wd * w[i]);
      w[i] -= m[i];
    });
    EXPECT_TRUE(same_bits(got.w, want.w) && same_bits(got.m, want.m)) << shift;
  }
  EXPECT_EQ(packed_runs, 1);
}

TEST(CudaQuads, LaneSumsAreEachLanesOwnBitForBit) {
  int64_t n = 0;
  const auto segs = segments(n);
  const ChunkPlan plan = plan_chunks(segs);
  const int64_t chunks = int64_t(plan.chunks.size());
  std::vector<double> block(ops::kStepScalars, 0.0);
  block[ops::kStepLr] = 0.01, block[ops::kStepBc1] = 0.1, block[ops::kStepBc2] = 0.002;
  block[ops::kStepGradFactor] = 1.0;
  const AdamScalars adam{0.9f, 0.999f, 1e-6f, 0.01f, block.data()};
  for (int64_t shift : {0, 1}) {
    Buffers got(n, shift), want(n, shift);
    const bool aligned = got.aligned();
    std::vector<double> squares(size_t(2 * chunks * kLanes)), moments(squares.size());
    std::vector<double> want_squares(squares.size()), want_moments(squares.size());
    run_all(chunks * kLaneQuads, LaneSquaresBody{plan.chunks.data(), got.at(got.w), got.at(got.g), squares.data(), aligned});
    run_all(chunks * kLaneQuads, LambMomentsBody{plan.chunks.data(), plan.segments.data(), adam, got.at(got.w),
                                                 got.at(got.g), got.at(got.m), got.at(got.v), moments.data(), aligned});
    float *w = want.at(want.w), *g = want.at(want.g), *m = want.at(want.m), *v = want.at(want.v);
    for (int64_t lane = 0; lane < chunks * kLanes; ++lane) {
      const Chunk& c = plan.chunks[size_t(lane / kLanes)];
      const bool decay = plan.segments[size_t(c.segment)].decay;
      double sa = 0.0, sb = 0.0, sw = 0.0, su = 0.0;
      for (int64_t e = lane % kLanes; e < c.count; e += kLanes) {
        const int64_t i = c.begin + e;
        const double x = w[i];
        sa += x * x;
        sb += double(g[i]) * double(g[i]);
        adam.moments(g[i], m[i], v[i]);
        const float u = adam.direction(m[i], v[i], w[i], decay);
        sw += double(w[i]) * double(w[i]);
        su += double(u) * double(u);
      }
      want_squares[size_t(2 * lane)] = sa, want_squares[size_t(2 * lane + 1)] = sb;
      want_moments[size_t(2 * lane)] = sw, want_moments[size_t(2 * lane + 1)] = su;
    }
    EXPECT_TRUE(same_bits(squares, want_squares)) << shift;
    EXPECT_TRUE(same_bits(moments, want_moments)) << shift;
    EXPECT_TRUE(same_bits(got.m, want.m) && same_bits(got.v, want.v)) << shift;
  }
}

}  // namespace
}  // namespace kiln
