// backend/cuda/optim_bodies.h — bodies of the CUDA multi-tensor kernels (elementwise_bodies.h says how they
// run): squared norms per segment, gradient scaling, the step's decisions, and the fused
// AdamW / LAMB / LARS updates over segments of the flat f32 buffers. The updates read the step's
// values (learning rate, bias corrections, clip factor, skip) from the step's scalars block in
// device memory when they run (backend.h, StepScalar), never from launch arguments.
//
// A launch runs over the chunks of kSumChunk elements of every segment (ChunkPlan, made once on
// the host and kept on the device). Elementwise updates take one item per element slot of a
// chunk. Sums take kLanes items per chunk, lane l adding elements l, l + kLanes, ... of the chunk
// in double (neighbouring lanes read neighbouring elements); a second launch adds each segment's
// lane sums in chunk and lane order: backend.h's order, the CPU backend's too.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/ordered_sum.h"
#include "kiln/backend/step_math.h"

namespace kiln::ops::cuda {

inline constexpr int64_t kLanes = kSumLanes;

// Chunk of a segment: elements [begin, begin + count) of the flat buffers.
struct Chunk {
  int64_t begin = 0;
  int32_t count = 0;
  int32_t segment = 0;
};
// Chunks of a segment one item of the groups pass combines: 8 x 32 = 256 lane sums.
inline constexpr int64_t kGroupChunks = 8;

// Segment k's chunks are [first, first + count) of the chunk table, its groups [first_group,
// first_group + groups) of the group table; decay as TensorSegment's.
struct SegmentChunks {
  int64_t first = 0;
  int32_t count = 0;
  int32_t decay = 0;
  int64_t first_group = 0;
  int64_t groups = 0;
};
// A group: chunks [first, first + count) of the chunk table, count <= kGroupChunks, of one segment.
struct ChunkGroup {
  int64_t first = 0;
  int64_t count = 0;
};

// The Adam step's constants, the step's scalars, and its two formulas, as the CPU backend's
// adam_math.h has them.
struct AdamScalars {
  float beta1, beta2, eps, weight_decay;
  const double* scalars;  // the step's: bias corrections, gradient factor (clipping), skip
  KILN_HD bool skipped() const { return step_skipped(scalars); }
  KILN_HD void moments(float raw_g, float& m, float& v) const {
    const float g = float(scalars[kStepGradFactor]) * raw_g;
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
  }
  KILN_HD float direction(float m, float v, float w, bool decay) const {
    return (m / float(scalars[kStepBc1])) / (sqrtf(v / float(scalars[kStepBc2])) + eps) +
           (decay ? weight_decay : 0.0f) * w;
  }
};

// Where element slot `item` of a per-element launch falls: false for slots past a chunk's end.
KILN_HD inline bool element_of(const Chunk* chunks, int64_t item, int64_t& i, int32_t& segment) {
  const Chunk& c = chunks[item / kSumChunk];
  const int64_t e = item % kSumChunk;
  if (e >= c.count) return false;
  i = c.begin + e;
  segment = c.segment;
  return true;
}

// Item = lane of a chunk: partial[item] = (Σ a², Σ b²) over its elements (b may be null).
struct LaneSquaresBody {
  const Chunk* chunks;
  const float* a;
  const float* b;
  double* partial;  // 2 per item
  KILN_HD void operator()(int64_t item) const {
    const Chunk& c = chunks[item / kLanes];
    double sa = 0.0, sb = 0.0;
    for (int64_t e = item % kLanes; e < c.count; e += kLanes) {
      const double x = a[c.begin + e];
      sa += x * x;
      if (b) sb += double(b[c.begin + e]) * double(b[c.begin + e]);
    }
    partial[2 * item] = sa;
    partial[2 * item + 1] = sb;
  }
};

// Item = lane of a chunk: the Adam moments of its elements, and partial[item] = (Σ w², Σ u²);
// (0, 0) and nothing else when the step is skipped.
struct LambMomentsBody {
  const Chunk* chunks;
  const SegmentChunks* segments;
  AdamScalars adam;
  const float* w;
  const float* g;
  float* m;
  float* v;
  double* partial;
  KILN_HD void operator()(int64_t item) const {
    const Chunk& c = chunks[item / kLanes];
    const bool decay = segments[c.segment].decay;
    double sw = 0.0, su = 0.0;
    for (int64_t e = adam.skipped() ? c.count : item % kLanes; e < c.count; e += kLanes) {
      const int64_t i = c.begin + e;
      adam.moments(g[i], m[i], v[i]);
      const float u = adam.direction(m[i], v[i], w[i], decay);
      sw += double(w[i]) * double(w[i]);
      su += double(u) * double(u);
    }
    partial[2 * item] = sw;
    partial[2 * item + 1] = su;
  }
};

// Item g = group g: group_sums[2 g .. 2 g + 1] = its chunks' lane sums (pairs) added in chunk and
// lane order.
struct GroupTotalsBody {
  const ChunkGroup* groups;
  const double* partial;  // (chunks x kLanes, 2)
  double* group_sums;     // (groups, 2)
  KILN_HD void operator()(int64_t g) const {
    const double* lanes = partial + 2 * groups[g].first * kLanes;
    const int64_t n = groups[g].count * kLanes;
    group_sums[2 * g] = ordered_sum(0.0, n, [&](int64_t j) { return lanes[2 * j]; });
    group_sums[2 * g + 1] = ordered_sum(0.0, n, [&](int64_t j) { return lanes[2 * j + 1]; });
  }
};

// Item k = segment k: its groups' sums added in order into sums (n) or, with pairs, sums (n, 2).
struct SegmentTotalsBody {
  const SegmentChunks* segments;
  const double* group_sums;  // (groups, 2)
  double* sums;
  bool pairs;
  KILN_HD void operator()(int64_t k) const {
    const double* first = group_sums + 2 * segments[k].first_group;
    const int64_t n = segments[k].groups;
    const double a = ordered_sum(0.0, n, [&](int64_t j) { return first[2 * j]; });
    if (!pairs) {
      sums[k] = a;
      return;
    }
    sums[2 * k] = a;
    sums[2 * k + 1] = ordered_sum(0.0, n, [&](int64_t j) { return first[2 * j + 1]; });
  }
};

// Item k = segment k: the step size of LAMB, lr · ‖w‖/‖u‖ (1 when either is 0), from norms
// (n, 2) = (Σ w², Σ u²).
struct LambRatioBody {
  const double* norms;
  const double* scalars;  // the step's: lr
  float* step;
  KILN_HD void operator()(int64_t k) const {
    const double lr = double(float(scalars[kStepLr]));
    const double wn = sqrt(norms[2 * k]), un = sqrt(norms[2 * k + 1]);
    step[k] = float(lr * (wn > 0.0 && un > 0.0 ? wn / un : 1.0));
  }
};

// Item k = segment k: LARS's step size, lr · eeta ‖w‖ / (‖g‖ + wd ‖w‖ + epsilon) where the
// segment decays (1 for the ratio when a norm is 0), lr elsewhere; norms (n, 2) = (Σ w², Σ g²).
struct LarsRatioBody {
  const SegmentChunks* segments;
  const double* norms;
  const double* scalars;  // the step's: lr
  float weight_decay, eeta, epsilon;
  float* step;
  KILN_HD void operator()(int64_t k) const {
    const float lr = float(scalars[kStepLr]);
    if (!segments[k].decay) {
      step[k] = lr;
      return;
    }
    const double wn = sqrt(norms[2 * k]), gn = sqrt(norms[2 * k + 1]);
    const double ratio = wn > 0.0 && gn > 0.0
                             ? double(eeta) * wn / (gn + double(weight_decay) * wn + double(epsilon))
                             : 1.0;
    step[k] = float(double(lr) * ratio);
  }
};

// w_compute[i] = w (bf16 / f16), when the copy exists.
KILN_HD inline void refresh(const FloatPtr& compute, int64_t i, float w) {
  if (compute.p) compute.set(i, w);
}

// Item = element slot: the AdamW step of element i.
struct AdamWBody {
  const Chunk* chunks;
  const SegmentChunks* segments;
  AdamScalars adam;
  float* w;
  const float* g;
  float* m;
  float* v;
  FloatPtr compute;
  KILN_HD void operator()(int64_t item) const {
    int64_t i = 0;
    int32_t k = 0;
    if (adam.skipped() || !element_of(chunks, item, i, k)) return;
    adam.moments(g[i], m[i], v[i]);
    w[i] -= float(adam.scalars[kStepLr]) * adam.direction(m[i], v[i], w[i], segments[k].decay);
    refresh(compute, i, w[i]);
  }
};

// Item = element slot: w -= step[segment] · u with u from the moments LambMomentsBody left.
struct LambUpdateBody {
  const Chunk* chunks;
  const SegmentChunks* segments;
  AdamScalars adam;
  const float* step;
  float* w;
  const float* m;
  const float* v;
  FloatPtr compute;
  KILN_HD void operator()(int64_t item) const {
    int64_t i = 0;
    int32_t k = 0;
    if (adam.skipped() || !element_of(chunks, item, i, k)) return;
    w[i] -= step[k] * adam.direction(m[i], v[i], w[i], segments[k].decay);
    refresh(compute, i, w[i]);
  }
};

// Item = element slot: v = momentum v + step[segment] (g + wd w); w -= v (wd only where decay).
struct LarsUpdateBody {
  const Chunk* chunks;
  const SegmentChunks* segments;
  const double* scalars;  // the step's: skip
  const float* step;
  float momentum, weight_decay;
  float* w;
  const float* g;
  float* vel;
  FloatPtr compute;
  KILN_HD void operator()(int64_t item) const {
    int64_t i = 0;
    int32_t k = 0;
    if (step_skipped(scalars) || !element_of(chunks, item, i, k)) return;
    const float wd = segments[k].decay ? weight_decay : 0.0f;
    vel[i] = momentum * vel[i] + step[k] * (g[i] + wd * w[i]);
    w[i] -= vel[i];
    refresh(compute, i, w[i]);
  }
};

// Item i: x[i] *= f32(scalars[slot]).
struct ScaleByScalarBody {
  float* x;
  const double* scalars;
  int slot;
  KILN_HD void operator()(int64_t i) const { x[i] *= float(scalars[slot]); }
};

// One item: the norm's squares over the owned segments into the step's scalars, in order of k
// as the CPU's owned_sum (step_math.h) adds them, 16 loads at a time (BERT-large: 390 segments,
// 25 waits on memory instead of 390). A segment not owned adds +0.0, which leaves the sum as it is.
struct StepNormSquaresBody {
  const double* sums;     // (n)
  const int32_t* owners;  // (n)
  int64_t n;
  double* scalars;
  KILN_HD void operator()(int64_t) const {
    scalars[kStepNormSquares] = ordered_sum(0.0, n, [&](int64_t k) { return owners[k] ? sums[k] : 0.0; });
  }
};

// One item: the step's decisions (step_math.h).
struct StepDecideBody {
  double* scalars;
  KILN_HD void operator()(int64_t) const { decide_step(scalars); }
};

}  // namespace kiln::ops::cuda
