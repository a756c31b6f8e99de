// backend/cuda/pool_bodies.h — bodies of the CUDA pooling kernels over NHWC activations (elementwise_bodies.h
// says how they run): max pooling with its argmax, its backward as a gather (each input element
// adds the gradients routed to it in output order, no atomics), and the global average pool. The
// sums run in f32 in the CPU backend's order (backend/cpu/pool.cc), so results match it bitwise.
#pragma once
#include <math.h>

#include <cstdint>

#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/pool_cover.h"

namespace kiln::ops::cuda {

// A pooling window's geometry (ops::PoolShape without the dependency on backend.h).
struct PoolGeometry {
  int64_t N, H, W, C, R, S, stride_h, stride_w, pad_h, pad_w, P, Q;
};

// Item o = output element ((n * P + p) * Q + q) * C + c: the window's first maximum in scan
// order, and its position h * W + w (padding never wins).
struct MaxPoolBody {
  PoolGeometry g;
  FloatPtr x, y;
  int32_t* argmax;
  KILN_HD void operator()(int64_t o) const {
    const int64_t c = o % g.C, q = (o / g.C) % g.Q, p = (o / (g.C * g.Q)) % g.P,
                  n = o / (g.C * g.Q * g.P);
    float best = -INFINITY;
    int32_t at = -1;
    for (int64_t i = 0; i < g.R; ++i) {
      const int64_t h = p * g.stride_h - g.pad_h + i;
      if (h < 0 || h >= g.H) continue;
      for (int64_t j = 0; j < g.S; ++j) {
        const int64_t w = q * g.stride_w - g.pad_w + j;
        if (w < 0 || w >= g.W) continue;
        const float v = x[((n * g.H + h) * g.W + w) * g.C + c];
        if (v > best || at < 0) best = v, at = int32_t(h * g.W + w);
      }
    }
    y.set(o, best);
    argmax[o] = at;
  }
};

// Item i = input element ((n * H + h) * W + w) * C + c: dx = Σ dy over the outputs whose argmax
// is (h, w), in output order, in f32.
struct MaxPoolBackwardBody {
  PoolGeometry g;
  FloatPtr dy, dx;
  const int32_t* argmax;
  KILN_HD void operator()(int64_t i) const {
    const int64_t c = i % g.C, w = (i / g.C) % g.W, h = (i / (g.C * g.W)) % g.H,
                  n = i / (g.C * g.W * g.H);
    const PoolCover rows = pool_cover(h, g.pad_h, g.R, g.stride_h, g.P);
    const PoolCover cols = pool_cover(w, g.pad_w, g.S, g.stride_w, g.Q);
    const int32_t pos = int32_t(h * g.W + w);
    float sum = 0.0f;
    for (int64_t p = rows.first; p <= rows.last; ++p)
      for (int64_t q = cols.first; q <= cols.last; ++q) {
        const int64_t o = ((n * g.P + p) * g.Q + q) * g.C + c;
        if (argmax[o] == pos) sum += dy[o];
      }
    dx.set(i, sum);
  }
};

// Item k = n * C + c: y[n, c] = (Σ_hw x) / HW, summed in f32 in hw order.
struct GlobalAvgPoolBody {
  FloatPtr x, y;
  int64_t HW, C;
  KILN_HD void operator()(int64_t k) const {
    const int64_t n = k / C, c = k % C;
    float sum = 0.0f;
    for (int64_t i = 0; i < HW; ++i) sum += x[(n * HW + i) * C + c];
    y.set(k, sum * (1.0f / float(HW)));
  }
};

// Item i = element of dx (N, HW, C): dy[n, c] / HW.
struct GlobalAvgPoolBackwardBody {
  FloatPtr dy, dx;
  int64_t HW, C;
  KILN_HD void operator()(int64_t i) const {
    const int64_t c = i % C, n = i / (HW * C);
    dx.set(i, dy[n * C + c] * (1.0f / float(HW)));
  }
};

}  // namespace kiln::ops::cuda
