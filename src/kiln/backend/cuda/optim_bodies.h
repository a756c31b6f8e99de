// backend/cuda/optim_bodies.h — bodies of the CUDA multi-tensor kernels (elementwise_bodies.h says how they
// run): squared norms per segment, gradient scaling, the step's decisions, and the fused
// AdamW / LAMB / LARS updates over segments of the flat f32 buffers. The updates read the step's
// values (learning rate, bias corrections, clip factor, skip) from the step's scalars block in
// device memory when they run (backend.h, StepScalar), never from launch arguments.
//
// A launch runs over the chunks of kSumChunk elements of every segment (ChunkPlan, made once on
// the host and kept on the device). Elementwise updates take one item per kQuad element slots of
// a chunk. Sums take kLanes lanes per chunk, lane l adding elements l, l + kLanes, ... of the
// chunk in double (neighbouring lanes read neighbouring elements); a second launch adds each
// segment's lane sums in chunk and lane order: backend.h's order, the CPU backend's too.
//
// The f32 buffers are read and written as float4 (vec_access.h's packs): an update item takes
// four element slots, a lane item four neighbouring lanes (four sums, each in its lane's order,
// so the same partials), wherever the four elements lie in one chunk at a 16-byte boundary of
// aligned buffers (a segment's offset in the flat buffer decides), element by element elsewhere.
// HBM bytes per parameter: AdamW reads w, g, m, v and writes w, m, v, 28 B (+2 B for a bf16
// compute copy); LAMB's moments pass 16 B read + 8 B written and its update 12 B + 4 B (+2 B);
// LARS's update 12 B + 8 B (+2 B), its norms 8 B. BERT-large's 335M parameters under AdamW move
// 10 GB: 2.8 / 2.0 ms at 100% of an H100's / H200's HBM, 4.0 / 2.8 ms at the 70% target.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/ordered_sum.h"
#include "kiln/backend/cuda/vec_access.h"
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

// Elements (and lanes) per item of the update and lane launches: one float4.
inline constexpr int kQuad = 4;
inline constexpr int64_t kLaneQuads = kLanes / kQuad;  // lane items per chunk

// Elements [i, i + count) of the flat buffers (count <= kQuad), read and written as one float4
// each where `packed`.
struct Quad {
  int64_t i;
  int count;
  bool packed;
};
// The quad at element e of chunk c; `aligned`: the launch's buffers are 16-byte aligned.
KILN_HD inline Quad quad_at(const Chunk& c, int64_t e, bool aligned) {
  const int64_t left = c.count - e, i = c.begin + e;
  const int count = left <= 0 ? 0 : left < kQuad ? int(left) : kQuad;
  return {i, count, aligned && count == kQuad && i % kQuad == 0};
}
KILN_HD inline void load_quad(const float* p, const Quad& q, float (&v)[kQuad]) {
  if (q.packed) return load_packs<kQuad>(p + q.i, v);
  for (int j = 0; j < kQuad; ++j) v[j] = j < q.count ? p[q.i + j] : 0.0f;
}
KILN_HD inline void store_quad(float* p, const Quad& q, const float (&v)[kQuad]) {
  if (q.packed) return store_packs<kQuad>(p + q.i, v);
  for (int j = 0; j < q.count; ++j) p[q.i + j] = v[j];
}

// The quad of element slots [kQuad item, kQuad item + kQuad) of a per-element launch (slots past
// a chunk's end: count 0 or less than kQuad), and its chunk's segment.
KILN_HD inline Quad slots_of(const Chunk* chunks, int64_t item, bool aligned, int32_t& segment) {
  const int64_t slot = item * kQuad;
  const Chunk& c = chunks[slot / kSumChunk];
  segment = c.segment;
  return quad_at(c, slot % kSumChunk, aligned);
}

// Item = kQuad neighbouring lanes of a chunk (item = chunk kLaneQuads + q: lanes kQuad q ..
// kQuad q + 3): partial[2 lane] = (Σ a², Σ b²) over each lane's elements (b may be null).
struct LaneSquaresBody {
  const Chunk* chunks;
  const float* a;
  const float* b;
  double* partial;  // 2 per lane
  bool aligned;
  KILN_HD void operator()(int64_t item) const {
    const Chunk& c = chunks[item / kLaneQuads];
    double sa[kQuad] = {}, sb[kQuad] = {};
    for (int64_t e = (item % kLaneQuads) * kQuad; e < c.count; e += kLanes) {
      const Quad q = quad_at(c, e, aligned);
      float av[kQuad], bv[kQuad];
      load_quad(a, q, av);
      if (b) load_quad(b, q, bv);
      for (int j = 0; j < q.count; ++j) {
        const double x = av[j];
        sa[j] += x * x;
        if (b) sb[j] += double(bv[j]) * double(bv[j]);
      }
    }
    for (int j = 0; j < kQuad; ++j) {
      partial[2 * (item * kQuad + j)] = sa[j];
      partial[2 * (item * kQuad + j) + 1] = sb[j];
    }
  }
};

// Item = kQuad neighbouring lanes of a chunk, as LaneSquaresBody: the Adam moments of their
// elements, and partial[2 lane] = (Σ w², Σ u²) per lane; (0, 0) and nothing else when the step
// is skipped.
struct LambMomentsBody {
  const Chunk* chunks;
  const SegmentChunks* segments;
  AdamScalars adam;
  const float* w;
  const float* g;
  float* m;
  float* v;
  double* partial;
  bool aligned;
  KILN_HD void operator()(int64_t item) const {
    const Chunk& c = chunks[item / kLaneQuads];
    const bool decay = segments[c.segment].decay;
    double sw[kQuad] = {}, su[kQuad] = {};
    for (int64_t e = adam.skipped() ? c.count : (item % kLaneQuads) * kQuad; e < c.count; e += kLanes) {
      const Quad q = quad_at(c, e, aligned);
      float wv[kQuad], gv[kQuad], mv[kQuad], vv[kQuad];
      load_quad(w, q, wv);
      load_quad(g, q, gv);
      load_quad(m, q, mv);
      load_quad(v, q, vv);
      for (int j = 0; j < q.count; ++j) {
        adam.moments(gv[j], mv[j], vv[j]);
        const float u = adam.direction(mv[j], vv[j], wv[j], decay);
        sw[j] += double(wv[j]) * double(wv[j]);
        su[j] += double(u) * double(u);
      }
      store_quad(m, q, mv);
      store_quad(v, q, vv);
    }
    for (int j = 0; j < kQuad; ++j) {
      partial[2 * (item * kQuad + j)] = sw[j];
      partial[2 * (item * kQuad + j) + 1] = su[j];
    }
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

// Item = kQuad element slots (slots_of): the AdamW step of their elements.
struct AdamWBody {
  const Chunk* chunks;
  const SegmentChunks* segments;
  AdamScalars adam;
  float* w;
  const float* g;
  float* m;
  float* v;
  FloatPtr compute;
  bool aligned;
  KILN_HD void operator()(int64_t item) const {
    int32_t k = 0;
    const Quad q = slots_of(chunks, item, aligned, k);
    if (adam.skipped() || q.count <= 0) return;
    float wv[kQuad], gv[kQuad], mv[kQuad], vv[kQuad];
    load_quad(w, q, wv);
    load_quad(g, q, gv);
    load_quad(m, q, mv);
    load_quad(v, q, vv);
    for (int j = 0; j < q.count; ++j) {
      adam.moments(gv[j], mv[j], vv[j]);
      wv[j] -= float(adam.scalars[kStepLr]) * adam.direction(mv[j], vv[j], wv[j], segments[k].decay);
      refresh(compute, q.i + j, wv[j]);
    }
    store_quad(w, q, wv);
    store_quad(m, q, mv);
    store_quad(v, q, vv);
  }
};

// Item = kQuad element slots: w -= step[segment] · u with u from the moments LambMomentsBody left.
struct LambUpdateBody {
  const Chunk* chunks;
  const SegmentChunks* segments;
  AdamScalars adam;
  const float* step;
  float* w;
  const float* m;
  const float* v;
  FloatPtr compute;
  bool aligned;
  KILN_HD void operator()(int64_t item) const {
    int32_t k = 0;
    const Quad q = slots_of(chunks, item, aligned, k);
    if (adam.skipped() || q.count <= 0) return;
    float wv[kQuad], mv[kQuad], vv[kQuad];
    load_quad(w, q, wv);
    load_quad(m, q, mv);
    load_quad(v, q, vv);
    for (int j = 0; j < q.count; ++j) {
      wv[j] -= step[k] * adam.direction(mv[j], vv[j], wv[j], segments[k].decay);
      refresh(compute, q.i + j, wv[j]);
    }
    store_quad(w, q, wv);
  }
};

// Item = kQuad element slots: v = momentum v + step[segment] (g + wd w); w -= v (wd only where
// decay).
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
  bool aligned;
  KILN_HD void operator()(int64_t item) const {
    int32_t k = 0;
    const Quad q = slots_of(chunks, item, aligned, k);
    if (step_skipped(scalars) || q.count <= 0) return;
    const float wd = segments[k].decay ? weight_decay : 0.0f;
    float wv[kQuad], gv[kQuad], vv[kQuad];
    load_quad(w, q, wv);
    load_quad(g, q, gv);
    load_quad(vel, q, vv);
    for (int j = 0; j < q.count; ++j) {
      vv[j] = momentum * vv[j] + step[k] * (gv[j] + wd * wv[j]);
      wv[j] -= vv[j];
      refresh(compute, q.i + j, wv[j]);
    }
    store_quad(vel, q, vv);
    store_quad(w, q, wv);
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
