// backend/cuda/attention_backward.h — the fused attention's backward (attention_tiles.h) in two
// passes without atomics, each warp holding 16 rows of the block in registers as mma.sync
// fragments (warp_mma.h), the streamed rows passing through shared memory:
//   key pass    keys k0 .. k0 + 63, query blocks of 32 streamed: warp w's keys as K's and V's A
//               fragments; S^T = K Q^T and dP^T = V dO^T in registers (keys as rows), the dropped
//               P^T and dS^T repacked as A fragments where they lie, dV += P^T dO, dK += dS^T Q;
//   query pass  queries q0 .. q0 + 63, key blocks of 32 streamed: warp w's rows as Q's and dO's A
//               fragments; S = Q K^T, dP = dO V^T, dS repacked as A, dQ += dS K.
// Nothing of S x S leaves registers; the dropout's keep bits are the forward's, read back. The
// streamed rows are B operands of the policy's products: as rows for the scores (Q, dO, K, V) and
// as columns for the gradients (dO, Q, K); on sm_90a the warpgroup's wgmma reads them, elsewhere
// each warp's fragment loads (32-bit reads for rows, ldmatrix.trans for columns).
#pragma once
#include <cmath>
#include <cstdint>

#include "kiln/backend/cuda/attention_tiles.h"

namespace kiln::ops::cuda {

inline constexpr FlashBlock kFlashKeyPass{64, 32};    // key rows (dk, dv), query rows
inline constexpr FlashBlock kFlashQueryPass{64, 32};  // query rows (dq), key rows

// A pass's shared memory: the block's two kinds of rows (K and V, or Q and dO; then its gradients
// rounded to T), the streamed block's two (Q and dO, or K and V), the keys' biases and the
// queries' lse and D, each for whichever rows are the keys and the queries.
struct FlashBackwardSmem {
  template <typename T>
  struct Tiles {
    T *outer[2], *inner[2];   // (64, d) x 2, (32, d) x 2, core_offset's layout
    float *bias, *lse, *dot;  // per key, per query, per query
  };
  template <typename T>
  KILN_HD static Tiles<T> carve(SmemCarver& c, int d, FlashBlock f, int keys, int queries) {
    Tiles<T> t;
    for (T*& p : t.outer) p = c.take<T>(f.outer * d);
    for (T*& p : t.inner) p = c.take<T>(f.inner * d);
    t.bias = c.take<float>(keys);
    t.lse = c.take<float>(queries);
    t.dot = c.take<float>(queries);
    return t;
  }
  template <typename T>
  KILN_HD static Tiles<T> key_pass(SmemCarver& c, int d) {
    return carve<T>(c, d, kFlashKeyPass, kFlashKeyPass.outer, kFlashKeyPass.inner);
  }
  template <typename T>
  KILN_HD static Tiles<T> query_pass(SmemCarver& c, int d) {
    return carve<T>(c, d, kFlashQueryPass, kFlashQueryPass.inner, kFlashQueryPass.outer);
  }
};

template <typename T>
KILN_HD inline int64_t flash_backward_smem_bytes(int d) {
  SmemCarver key, query;
  FlashBackwardSmem::key_pass<T>(key, flash_tile_dim(d));
  FlashBackwardSmem::query_pass<T>(query, flash_tile_dim(d));
  return key.used > query.used ? key.used : query.used;
}

// The backward's first step, before either pass: D_i = do_i . o_i in f32, in column order, of
// every row into a.dot, which both passes read (each row's once, not once a block of the other
// pass). Item i: row i % S of head i / S % heads of sample i / (S heads).
template <typename T>
struct FlashRowDotsBody {
  FlashBackwardArgs<T> a;
  KILN_HD void operator()(int64_t item) const {
    const FlashShape& s = a.shape;
    const int64_t i = item % s.S, h = item / s.S % s.heads, b = item / (s.S * s.heads);
    const T *dout = a.dout.row(b, h, i), *o = a.o.row(b, h, i);
    float dot = 0.0f;
    if (a.dout.packs && a.o.packs) {
      constexpr int W = kPackLanes<T>;
      for (int64_t c = 0; c < s.d; c += W) {
        float x[W], y[W];
        load_packs<W>(dout + c, x);
        load_packs<W>(o + c, y);
        for (int j = 0; j < W; ++j) dot += x[j] * y[j];
      }
    } else {
      for (int64_t c = 0; c < s.d; ++c) dot += load(dout[c]) * load(o[c]);
    }
    a.dot[item] = dot;
  }
};

// One element of backward from its score product qk = q_i . k_j, dp = do_i . v_j, the row's lse and D
// and the key's bias: the dropped probability (for dv) and dS scaled (for dq, dk).
struct FlashGrad {
  float dropped, dscore;
};
KILN_HD inline FlashGrad flash_grad(float qk, float dp, float bias, float lse, float dot, float keep,
                                    const FlashDropout& d, float scale) {
  const float prob = flash_exp(qk * scale + bias - lse);
  const float kept = keep * d.scale;
  return {prob * kept, prob * (dp * kept - dot) * scale};
}

// Rows `first` .. of two heads' tensors (q and dO, or k and v) into two tiles.
template <typename Tiles, typename T>
KILN_HD void flash_load_two(const Tiles& t, const FlashHeads<const T>& x0, const FlashHeads<const T>& x1,
                            const FlashShape& s, int64_t b, int64_t h, int64_t first, int rows, T* const tiles[2],
                            int width) {
  flash_load_rows(t, x0, s, b, h, first, rows, tiles[0], width);
  flash_load_rows(t, x1, s, b, h, first, rows, tiles[1], width);
}

// lse and D of `rows` query rows from q0 (past the sequence: lse +inf, so that P = 0).
template <typename Tiles, typename T>
KILN_HD void flash_load_row_stats(const Tiles& t, const FlashBackwardArgs<T>& a, int64_t b, int64_t h, int64_t q0,
                                  int rows, float* lse, float* dot) {
  const FlashShape& s = a.shape;
  t.for_each(rows, [=](int r) {
    const int64_t i = q0 + r;
    lse[r] = i < s.S ? a.lse[(b * s.heads + h) * s.S + i] : INFINITY;
    dot[r] = i < s.S ? a.dot[(b * s.heads + h) * s.S + i] : 0.0f;
  });
}

// The forward's saved keep bits of head h of sample b, as flash_keep_made_for_*'s source.
template <typename T>
KILN_HD auto flash_saved_keep(const FlashBackwardArgs<T>& a, int64_t b, int64_t h) {
  return [&a, b, h](int64_t i, int64_t j) { return flash_saved_keep4(a.drop, a.shape, b, h, i, j); };
}

// A thread's registers in a pass at head dim D: its warp's 16 rows of the block's two kinds as A
// fragments (K, V or Q, dO), the score and dP products of those rows and the 32 streamed ones,
// the dropped P or dS repacked as A, and the block's gradients of its rows (dK, dV or dQ).
template <typename T, int D>
struct FlashBackwardRegs {
  static constexpr int kSteps = D / 16, kInner = kFlashKeyPass.inner, kTiles = kInner / 8, kInSteps = kInner / 16,
                       kOutTiles = D / 8;
  static_assert(kFlashQueryPass.inner == kInner);
  AFrag<T> a[2][kSteps];
  CFrag s[kTiles], dp[kTiles];
  AFrag<T> x[kInSteps];
  CFrag grad[2][kOutTiles];
  BFrag<T> b;
  uint32_t made, keep[4];  // the forward's keep bits this lane read, those of its elements (attention_tiles.h)
};

// s = a[0] inner[0]^T, dp = a[1] inner[1]^T: the warps' rows against the 32 streamed rows.
template <int D, typename Tiles, typename Regs, typename T>
KILN_HD void flash_backward_scores(const Tiles& t, Regs& r, T* const inner[2]) {
  using X = FlashBackwardRegs<T, D>;
  t.threads([&r](int th) {
    KILN_UNROLL for (int j = 0; j < X::kTiles; ++j) r[th].s[j] = r[th].dp[j] = CFrag{};
  });
  t.template products<X::kInner, D, BOf::rows>(
      r, [](X& x) -> CFrag* { return x.s; }, [](X& x, int kk) -> const AFrag<T>& { return x.a[0][kk]; }, inner[0], D);
  t.template products<X::kInner, D, BOf::rows>(
      r, [](X& x) -> CFrag* { return x.dp; }, [](X& x, int kk) -> const AFrag<T>& { return x.a[1][kk]; }, inner[1],
      D);
}

// grad[which] += x (16 x 32) times the streamed rows of `cols` (32 x D).
template <int D, int which, typename Tiles, typename Regs, typename T>
KILN_HD void flash_backward_gradient(const Tiles& t, Regs& r, const T* cols) {
  using X = FlashBackwardRegs<T, D>;
  t.template products<D, X::kInner, BOf::cols>(
      r, [](X& x) -> CFrag* { return x.grad[which]; }, [](X& x, int c) -> const AFrag<T>& { return x.x[c]; }, cols, D);
}

// The block's rows in its tiles (key pass: K and V; query pass: Q and dO) as the warps' A
// fragments, their gradients zeroed.
template <int D, typename Tiles, typename Regs, typename T>
KILN_HD void flash_backward_outer_rows(const Tiles& t, Regs& r, T* const outer[2]) {
  using X = FlashBackwardRegs<T, D>;
  t.threads([&r, outer](int th) {
    X& x = r[th];
    KILN_UNROLL for (int which = 0; which < 2; ++which) {
      KILN_UNROLL for (int kk = 0; kk < X::kSteps; ++kk)
        x.a[which][kk] = a_frag(outer[which], D, th / 32 * 16, 16 * kk, th % 32);
      KILN_UNROLL for (int n = 0; n < X::kOutTiles; ++n) x.grad[which][n] = CFrag{};
    }
  });
}

// The gradients of the warp's rows rounded to T into the block's tiles (their A fragments are
// loaded), then stored: kCount of them (dk and dv, or dq).
template <int D, int kCount, typename Tiles, typename Regs, typename T>
KILN_HD void flash_backward_store(const Tiles& t, Regs& r, T* const outer[2], const FlashShape& s, int64_t b,
                                  int64_t h, int64_t first, int rows, const FlashHeads<T> (&out)[kCount]) {
  using X = FlashBackwardRegs<T, D>;
  t.threads([&r, outer](int th) {
    const X& x = r[th];
    const int lane = th % 32, row0 = th / 32 * 16;
    KILN_UNROLL for (int which = 0; which < kCount; ++which)
      KILN_UNROLL for (int n = 0; n < X::kOutTiles; ++n)
        KILN_UNROLL for (int i = 0; i < 4; ++i)
          outer[which][c_offset(D, row0, 8 * n, lane, i)] = store<T>(x.grad[which][n].c[i]);
  });
  t.sync();
  KILN_UNROLL for (int which = 0; which < kCount; ++which)
    flash_store_rows(t, outer[which], D, s, b, h, first, rows, out[which]);
}

// Key pass, one thread: its elements of S^T and dP^T (key rows, query columns) to the dropped P^T
// and dS^T, then P^T as the A operand.
template <int D, typename T>
KILN_HD void flash_key_pass_grads(FlashBackwardRegs<T, D>& x, const FlashBackwardArgs<T>& a,
                                  const FlashBackwardSmem::Tiles<T>& m, int th) {
  using X = FlashBackwardRegs<T, D>;
  const int lane = th % 32, key0 = th / 32 * 16;
  KILN_UNROLL for (int j = 0; j < X::kTiles; ++j)
    KILN_UNROLL for (int i = 0; i < 4; ++i) {
      const int key = key0 + c_row(lane, i), query = 8 * j + c_col(lane, i);
      const float keep = float(flash_keep_bit_for_keys(x.keep[i], lane, j));
      const FlashGrad f =
          flash_grad(x.s[j].c[i], x.dp[j].c[i], m.bias[key], m.lse[query], m.dot[query], keep, a.drop, a.shape.scale);
      x.s[j].c[i] = f.dropped;
      x.dp[j].c[i] = f.dscore;
    }
  KILN_UNROLL for (int c = 0; c < X::kInSteps; ++c) x.x[c] = a_frag_of<T>(x.s[2 * c], x.s[2 * c + 1]);
}

// Keys k0 .. k0 + 63 of head h of sample b at head dim D: dk, dv.
template <int D, typename Tiles, typename T>
KILN_HD void flash_key_pass_rows(const Tiles& t, const FlashBackwardArgs<T>& a, int64_t b, int64_t h, int64_t k0,
                                 char* smem) {
  using X = FlashBackwardRegs<T, D>;
  constexpr int K = kFlashKeyPass.outer, R = kFlashKeyPass.inner;
  const FlashShape& s = a.shape;
  SmemCarver carver{smem};
  const auto m = FlashBackwardSmem::key_pass<T>(carver, D);
  typename Tiles::template Regs<X> r;
  flash_load_two(t, a.k, a.v, s, b, h, k0, K, m.outer, D);
  t.for_each(K, [&](int j) { m.bias[j] = flash_key_bias(s, b, k0 + j); });
  t.sync();
  flash_backward_outer_rows<D>(t, r, m.outer);
  for (int64_t q0 = 0; q0 < s.S; q0 += R) {
    t.sync();  // the last query block's rows are read (and the first time, the key rows)
    flash_load_two(t, a.q, a.dout, s, b, h, q0, R, m.inner, D);
    flash_load_row_stats(t, a, b, h, q0, R, m.lse, m.dot);
    t.sync();
    flash_backward_scores<D>(t, r, m.inner);
    t.threads([&r, &a, b, h, k0, q0](int th) {
      r[th].made = flash_keep_made_for_keys<X::kTiles>(flash_saved_keep(a, b, h), q0, k0 + th / 32 * 16, th % 32);
    });
    flash_gather_keep_for_keys(t, r);
    t.threads([&r, &a, &m](int th) { flash_key_pass_grads<D>(r[th], a, m, th); });
    flash_backward_gradient<D, 1>(t, r, m.inner[1]);  // dV += P^T dO
    t.threads([&r](int th) {
      X& x = r[th];
      KILN_UNROLL for (int c = 0; c < X::kInSteps; ++c) x.x[c] = a_frag_of<T>(x.dp[2 * c], x.dp[2 * c + 1]);
    });
    flash_backward_gradient<D, 0>(t, r, m.inner[0]);  // dK += dS^T Q
  }
  const FlashHeads<T> out[2] = {a.dk, a.dv};
  flash_backward_store<D>(t, r, m.outer, s, b, h, k0, K, out);
}

// Query pass, one thread: its elements of S and dP (query rows, key columns) to dS as the A
// operand.
template <int D, typename T>
KILN_HD void flash_query_pass_grads(FlashBackwardRegs<T, D>& x, const FlashBackwardArgs<T>& a,
                                    const FlashBackwardSmem::Tiles<T>& m, int th) {
  using X = FlashBackwardRegs<T, D>;
  const int lane = th % 32, row0 = th / 32 * 16;
  KILN_UNROLL for (int j = 0; j < X::kTiles; ++j)
    KILN_UNROLL for (int i = 0; i < 4; ++i) {
      const int row = row0 + c_row(lane, i), key = 8 * j + c_col(lane, i);
      const float keep = float(flash_keep_bit_for_rows(x.keep[i / 2], lane, j, i % 2));
      x.s[j].c[i] =
          flash_grad(x.s[j].c[i], x.dp[j].c[i], m.bias[key], m.lse[row], m.dot[row], keep, a.drop, a.shape.scale)
              .dscore;
    }
  KILN_UNROLL for (int c = 0; c < X::kInSteps; ++c) x.x[c] = a_frag_of<T>(x.s[2 * c], x.s[2 * c + 1]);
}

// Query rows q0 .. q0 + 63 of head h of sample b at head dim D: dq.
template <int D, typename Tiles, typename T>
KILN_HD void flash_query_pass_rows(const Tiles& t, const FlashBackwardArgs<T>& a, int64_t b, int64_t h, int64_t q0,
                                   char* smem) {
  using X = FlashBackwardRegs<T, D>;
  constexpr int R = kFlashQueryPass.outer, K = kFlashQueryPass.inner;
  const FlashShape& s = a.shape;
  SmemCarver carver{smem};
  const auto m = FlashBackwardSmem::query_pass<T>(carver, D);
  typename Tiles::template Regs<X> r;
  flash_load_two(t, a.q, a.dout, s, b, h, q0, R, m.outer, D);
  flash_load_row_stats(t, a, b, h, q0, R, m.lse, m.dot);
  t.sync();
  flash_backward_outer_rows<D>(t, r, m.outer);
  for (int64_t k0 = 0; k0 < s.S; k0 += K) {
    t.sync();  // the last key block's rows are read (and the first time, the query rows)
    flash_load_two(t, a.k, a.v, s, b, h, k0, K, m.inner, D);
    t.for_each(K, [&](int j) { m.bias[j] = flash_key_bias(s, b, k0 + j); });
    t.sync();
    flash_backward_scores<D>(t, r, m.inner);
    t.threads([&r, &a, b, h, q0, k0](int th) {
      r[th].made = flash_keep_made_for_rows<X::kTiles>(flash_saved_keep(a, b, h), q0 + th / 32 * 16, k0, th % 32);
    });
    flash_gather_keep_for_rows(t, r);
    t.threads([&r, &a, &m](int th) { flash_query_pass_grads<D>(r[th], a, m, th); });
    flash_backward_gradient<D, 0>(t, r, m.inner[0]);  // dQ += dS K
  }
  const FlashHeads<T> out[1] = {a.dq};
  flash_backward_store<D>(t, r, m.outer, s, b, h, q0, R, out);
}

// The passes of one block on the host (HostTiles or a test's policy), a.dot made.
template <typename Tiles, typename T>
void flash_backward_key_block(const Tiles& t, const FlashBackwardArgs<T>& a, int64_t b, int64_t h, int64_t k0,
                              char* smem) {
  with_flash_head_dim(a.shape.d, [&]<int D>() { flash_key_pass_rows<D>(t, a, b, h, k0, smem); });
}
template <typename Tiles, typename T>
void flash_backward_query_block(const Tiles& t, const FlashBackwardArgs<T>& a, int64_t b, int64_t h, int64_t q0,
                                char* smem) {
  with_flash_head_dim(a.shape.d, [&]<int D>() { flash_query_pass_rows<D>(t, a, b, h, q0, smem); });
}

}  // namespace kiln::ops::cuda
