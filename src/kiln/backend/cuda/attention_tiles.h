// backend/cuda/attention_tiles.h — fused ("flash") attention as block algorithms written once over
// a tile policy: the CUDA kernel runs them with DeviceTiles (attention.cu: a thread block of
// kFlashThreads, shared memory, tensor-core products), the CPU backend with HostTiles (plain loops,
// one block at a time, the warps' register products emulated lane by lane), so the CPU runs the
// kernel's tiling, masking, online softmax and dropout, all but the tensor cores' summation order.
// This file: what both directions share, the backward passes and the host policy; the forward is
// attention_forward.h.
//
// Per (sample b, head h), with d = head_dim, s_ij = scale * q_i . k_j + bias_j (bias_j = -10000
// for a padding key, BERT's), P = softmax_j(s), Z the dropout's keep mask, p its probability:
//   forward   o_i = sum_j P_ij Z_ij / (1 - p) v_j, lse_i = log sum_j exp(s_ij)      (FlashAttention-2)
//   backward  D_i = do_i . o_i, dS_ij = P_ij (Z_ij / (1 - p) do_i . v_j - D_i),
//             dq_i = scale sum_j dS_ij k_j, dk_j = scale sum_i dS_ij q_i, dv_j = sum_i P_ij Z_ij/(1-p) do_i
// with P recomputed from the saved lse, in two passes without atomics (key blocks: dk, dv; query
// blocks: dq), each summing in a fixed order. Z is the CPU's dropout mask bit for bit: element
// (b, h, i, j) is element element_offset + (h S + i) S + j of global sample sample_offset + b.
// A tile policy has for_each(n, f): f(i) for each item i < n of a phase, in any order, on any of
// the block's threads, at any time before the next sync() (so the lambdas of a helper that returns
// first capture by value); sync(): the end of a phase; gemm(a, b, c, ...): a shared-memory tile
// product. For register products: Regs<X>, each thread's registers of type X; threads(f): f(th) on
// each thread th, its lanes running apart until the warp's next collective step (mma, quad_max,
// quad_sum, b_of_cols), so lambdas that such a step follows capture loop indices by value.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/vec_access.h"
#include "kiln/backend/cuda/warp_mma.h"
#include "kiln/core/philox.h"

namespace kiln::ops::cuda {

inline constexpr int kFlashWarps = 4;
inline constexpr int kFlashThreads = 32 * kFlashWarps;
inline constexpr int64_t kFlashMaxHeadDim = 128;  // head_dim: a multiple of 16 up to this

// A pass's block: `outer` rows stay in shared memory for the whole block, `inner` rows stream by.
struct FlashBlock {
  int outer, inner;
};
inline constexpr FlashBlock kFlashKeyPass{64, 32};  // backward: key rows (dk, dv), query rows
inline constexpr FlashBlock kFlashQueryPass{64, 32};  // backward: query rows (dq), key rows

// q, k, v, o or a gradient, heads read in place: element c of head h's row i of sample b at
// p[b * batch + h * head + i * ld + c] (ops::heads_view: batch S ld, head d).
template <typename T>
struct FlashHeads {
  T* p = nullptr;
  int64_t ld = 0, batch = 0, head = 0;
  bool packs = false;  // every head row is 16-byte aligned and whole 16-byte packs (vec_access.h)
  KILN_HD T* row(int64_t b, int64_t h, int64_t i) const { return p + b * batch + h * head + i * ld; }
};

struct FlashShape {
  int64_t B = 0, heads = 0, S = 0, d = 0;
  float scale = 1.0f;
  const int32_t* mask = nullptr;  // (B, S): 1 token, 0 padding
};

// The dropout of the probabilities (DropoutMask); p == 0: none.
struct FlashDropout {
  RngStream rng{0, 0};
  const int64_t* sample_offset = nullptr;  // the micro-batch's first global sample
  int64_t element_offset = 0;
  float p = 0.0f, scale = 1.0f;  // scale = 1 / (1 - p)
};

template <typename T>
struct FlashForwardArgs {
  FlashShape shape;
  FlashHeads<const T> q, k, v;
  FlashHeads<T> o;
  float* lse = nullptr;  // (B, heads, S)
  FlashDropout drop;
};

template <typename T>
struct FlashBackwardArgs {
  FlashShape shape;
  FlashHeads<const T> q, k, v, o, dout;
  FlashHeads<T> dq, dk, dv;
  const float* lse = nullptr;  // (B, heads, S), the forward's
  FlashDropout drop;
};

// A tile in shared memory as a GEMM operand: stored row-major with `ld`; `trans`: the operand is
// the transpose of what is stored.
template <typename T>
struct TileRef {
  const T* p;
  int ld;
  bool trans;
};

// Rows of a shared-memory tile of `cols` values: padded against bank conflicts, and a multiple
// of 16 bytes as wmma's loads want.
template <typename T>
KILN_HD constexpr int tile_ld(int cols) {
  return cols + 16 / int(sizeof(T));
}

// Carves a pass's shared memory into its tiles, 32-byte aligned (wmma's pointers). With a null base it
// only counts: `used` is the bytes a block needs.
struct SmemCarver {
  char* base = nullptr;
  int64_t used = 0;
  template <typename U>
  KILN_HD U* take(int64_t n) {
    used = (used + 31) / 32 * 32;
    U* p = base ? reinterpret_cast<U*>(base + used) : nullptr;
    used += n * int64_t(sizeof(U));
    return p;
  }
};

// Word i (< 4) of a Philox block, by selects rather than an index (which would put the block in
// local memory on the device).
KILN_HD inline uint32_t philox_word(const std::array<uint32_t, 4>& w, int64_t i) {
  return i == 0 ? w[0] : i == 1 ? w[1] : i == 2 ? w[2] : w[3];
}

// keep[t] = 0 where element first + t of global sample `sample` is dropped, else 1 (t < N <= 4):
// the words of its Philox blocks at counter (sample << 32) | (element / 4), as the CPU's dropout.
// The N lie in block first / 4 and, where they pass its end, the next one.
template <int N>
KILN_HD void flash_keep(const FlashDropout& d, uint64_t sample, int64_t first, float keep[N]) {
  const uint64_t hi = sample << 32;
  const int64_t shift = first & 3;
  const auto a = d.rng.block(hi | uint64_t(uint32_t(first >> 2)));
  const auto b = shift + N > 4 ? d.rng.block(hi | uint64_t(uint32_t((first >> 2) + 1))) : a;
  for (int64_t t = 0; t < N; ++t) {
    const int64_t i = shift + t;
    const uint32_t word = i < 4 ? philox_word(a, i) : philox_word(b, i - 4);
    keep[t] = u32_to_unit_float(word) < d.p ? 0.0f : 1.0f;
  }
}

// The dropout's N keep values of row i's columns j .. j + N - 1 of head h of sample b (all 1
// without dropout).
template <int N>
KILN_HD void flash_keep_row(const FlashDropout& d, const FlashShape& s, int64_t b, int64_t h, int64_t i, int64_t j,
                            float keep[N]) {
  if (d.p == 0.0f) {
    for (int t = 0; t < N; ++t) keep[t] = 1.0f;
    return;
  }
  flash_keep<N>(d, uint64_t(*d.sample_offset) + uint64_t(b), d.element_offset + (h * s.S + i) * s.S + j, keep);
}

// A key's bias: 0 for a token, -10000 for padding, -inf past the sequence (a tile's padding).
KILN_HD inline float flash_key_bias(const FlashShape& s, int64_t b, int64_t j) {
  if (j >= s.S) return -INFINITY;
  return s.mask[b * s.S + j] ? 0.0f : -10000.0f;
}

// rows x d values from rows `first` .. of a head into a tile (ld), zeros past the sequence.
// Rows of whole packs go a 16-byte pack per item (the tile's rows, tile_ld of d, are packs too):
// the same values, an eighth of the bf16 loads.
template <typename Tiles, typename T>
KILN_HD void flash_load_rows(const Tiles& t, const FlashHeads<const T>& x, const FlashShape& s, int64_t b,
                             int64_t h, int64_t first, int rows, T* tile, int ld) {
  const int d = int(s.d);
  if (x.packs) {
    constexpr int W = kPackLanes<T>;
    const int per_row = d / W;
    t.for_each(rows * per_row, [=](int e) {
      const int r = e / per_row, c = e % per_row * W;
      write_pack(tile + r * ld + c, first + r < s.S ? read_pack(x.row(b, h, first + r) + c) : Pack{});
    });
    return;
  }
  t.for_each(rows * d, [=](int e) {
    const int r = e / d, c = e % d;
    tile[r * ld + c] = first + r < s.S ? x.row(b, h, first + r)[c] : store<T>(0.0f);
  });
}

// rows x d values of a tile (ld; f32, or T as the forward's context) times `mul` (null: 1) into
// rows `first` .. of a head. Rows of whole packs (FlashHeads::packs) are written a 16-byte pack per
// item.
template <typename Tiles, typename U, typename T>
KILN_HD void flash_store_rows(const Tiles& t, const U* tile, int ld, const float* mul, const FlashShape& s,
                              int64_t b, int64_t h, int64_t first, int rows, const FlashHeads<T>& x) {
  const int d = int(s.d);
  if (x.packs) {
    constexpr int W = kPackLanes<T>;
    const int per_row = d / W;
    t.for_each(rows * per_row, [=](int e) {
      const int r = e / per_row, c = e % per_row * W;
      if (first + r >= s.S) return;
      T v[W];
      for (int j = 0; j < W; ++j) v[j] = store<T>(load(tile[r * ld + c + j]) * (mul ? mul[r] : 1.0f));
      Pack pack;
      std::memcpy(&pack, v, kPackBytes);
      write_pack(x.row(b, h, first + r) + c, pack);
    });
    return;
  }
  t.for_each(rows * d, [=](int e) {
    const int r = e / d, c = e % d;
    if (first + r < s.S) x.row(b, h, first + r)[c] = store<T>(load(tile[r * ld + c]) * (mul ? mul[r] : 1.0f));
  });
}

// D_i = do_i . o_i in f32, column order: the same in both backward passes.
template <typename T>
KILN_HD float flash_row_dot(const FlashBackwardArgs<T>& a, int64_t b, int64_t h, int64_t i) {
  const T *dout = a.dout.row(b, h, i), *o = a.o.row(b, h, i);
  float dot = 0.0f;
  for (int64_t c = 0; c < a.shape.d; ++c) dot += load(dout[c]) * load(o[c]);
  return dot;
}

// One element of backward from its score product qk = q_i . k_j, dp = do_i . v_j, the row's lse and D
// and the key's bias: the dropped probability (for dv) and dS scaled (for dq, dk).
struct FlashGrad {
  float dropped, dscore;
};
KILN_HD inline FlashGrad flash_grad(float qk, float dp, float bias, float lse, float dot, float keep,
                                    const FlashDropout& d, float scale) {
  const float prob = expf(qk * scale + bias - lse);
  const float kept = keep * d.scale;
  return {prob * kept, prob * (dp * kept - dot) * scale};
}

// ---- backward ----

// Per streamed block of backward: the score and dp products (f32), the dropped probabilities or
// dS in the compute dtype, and the streamed rows' bias or lse and D.
template <typename T>
struct FlashGradTiles {
  float *s, *dp;
  T* x;
};

template <typename T>
KILN_HD FlashGradTiles<T> carve_grad_tiles(SmemCarver& c, int rows, int cols) {
  FlashGradTiles<T> g;
  g.s = c.take<float>(rows * tile_ld<float>(cols));
  g.dp = c.take<float>(rows * tile_ld<float>(cols));
  g.x = c.take<T>(rows * tile_ld<T>(cols));
  return g;
}

// The key pass: keys k0 .. k0 + 63 of (b, h), query rows streamed in blocks of 32.
struct FlashKeyPassSmem {
  template <typename T>
  struct Tiles {
    T *k, *v, *q, *dout;   // (64, d) x 2, (32, d) x 2
    float *dk, *dv;        // (64, d) x 2
    FlashGradTiles<T> g;   // (32, 64)
    float *bias, *lse, *dot;  // (64), (32), (32)
  };
  template <typename T>
  KILN_HD static Tiles<T> carve(SmemCarver& c, int d) {
    const FlashBlock f = kFlashKeyPass;
    Tiles<T> t;
    t.k = c.take<T>(f.outer * tile_ld<T>(d));
    t.v = c.take<T>(f.outer * tile_ld<T>(d));
    t.q = c.take<T>(f.inner * tile_ld<T>(d));
    t.dout = c.take<T>(f.inner * tile_ld<T>(d));
    t.dk = c.take<float>(f.outer * tile_ld<float>(d));
    t.dv = c.take<float>(f.outer * tile_ld<float>(d));
    t.g = carve_grad_tiles<T>(c, f.inner, f.outer);
    t.bias = c.take<float>(f.outer);
    t.lse = c.take<float>(f.inner);
    t.dot = c.take<float>(f.inner);
    return t;
  }
};

// The query pass: query rows q0 .. q0 + 63, keys streamed in blocks of 32.
struct FlashQueryPassSmem {
  template <typename T>
  struct Tiles {
    T *q, *dout, *k, *v;   // (64, d) x 2, (32, d) x 2
    float* dq;             // (64, d)
    FlashGradTiles<T> g;   // (64, 32)
    float *bias, *lse, *dot;  // (32), (64), (64)
  };
  template <typename T>
  KILN_HD static Tiles<T> carve(SmemCarver& c, int d) {
    const FlashBlock f = kFlashQueryPass;
    Tiles<T> t;
    t.q = c.take<T>(f.outer * tile_ld<T>(d));
    t.dout = c.take<T>(f.outer * tile_ld<T>(d));
    t.k = c.take<T>(f.inner * tile_ld<T>(d));
    t.v = c.take<T>(f.inner * tile_ld<T>(d));
    t.dq = c.take<float>(f.outer * tile_ld<float>(d));
    t.g = carve_grad_tiles<T>(c, f.outer, f.inner);
    t.bias = c.take<float>(f.inner);
    t.lse = c.take<float>(f.outer);
    t.dot = c.take<float>(f.outer);
    return t;
  }
};

template <typename T>
KILN_HD inline int64_t flash_backward_smem_bytes(int d) {
  SmemCarver key, query;
  FlashKeyPassSmem::carve<T>(key, d);
  FlashQueryPassSmem::carve<T>(query, d);
  return key.used > query.used ? key.used : query.used;
}

// lse and D of `rows` query rows from q0 (past the sequence: lse +inf, so that P = 0).
template <typename Tiles, typename T>
KILN_HD void flash_load_row_stats(const Tiles& t, const FlashBackwardArgs<T>& a, int64_t b, int64_t h, int64_t q0,
                                  int rows, float* lse, float* dot) {
  const FlashShape& s = a.shape;
  t.for_each(rows, [=](int r) {
    const int64_t i = q0 + r;
    lse[r] = i < s.S ? a.lse[(b * s.heads + h) * s.S + i] : INFINITY;
    dot[r] = i < s.S ? flash_row_dot(a, b, h, i) : 0.0f;
  });
}

// S = q k^T and dP = do v^T of a (rows, cols) block; q / do rows come first in its tiles.
template <typename Tiles, typename T>
KILN_HD void flash_grad_products(const Tiles& t, const FlashGradTiles<T>& g, const T* q, const T* dout, const T* k,
                                 const T* v, int ldt, int rows, int cols, int d) {
  t.gemm(TileRef<T>{q, ldt, false}, TileRef<T>{k, ldt, true}, g.s, tile_ld<float>(cols), rows, cols, d, false);
  t.gemm(TileRef<T>{dout, ldt, false}, TileRef<T>{v, ldt, true}, g.dp, tile_ld<float>(cols), rows, cols, d, false);
}

// Keys k0 .. k0 + 63 of head h of sample b: dk, dv.
template <typename Tiles, typename T>
KILN_HD void flash_backward_key_block(const Tiles& t, const FlashBackwardArgs<T>& a, int64_t b, int64_t h,
                                      int64_t k0, char* smem) {
  constexpr int K = kFlashKeyPass.outer, R = kFlashKeyPass.inner;
  const FlashShape& s = a.shape;
  const int d = int(s.d), ldt = tile_ld<T>(d), ldf = tile_ld<float>(d), ldg = tile_ld<float>(K), ldx = tile_ld<T>(K);
  SmemCarver carver{smem};
  const auto m = FlashKeyPassSmem::carve<T>(carver, d);
  flash_load_rows(t, a.k, s, b, h, k0, K, m.k, ldt);
  flash_load_rows(t, a.v, s, b, h, k0, K, m.v, ldt);
  t.for_each(K * d, [&](int e) { m.dk[e / d * ldf + e % d] = m.dv[e / d * ldf + e % d] = 0.0f; });
  t.for_each(K, [&](int j) { m.bias[j] = flash_key_bias(s, b, k0 + j); });
  for (int64_t q0 = 0; q0 < s.S; q0 += R) {
    t.sync();  // the last query block's tiles are read
    flash_load_rows(t, a.q, s, b, h, q0, R, m.q, ldt);
    flash_load_rows(t, a.dout, s, b, h, q0, R, m.dout, ldt);
    flash_load_row_stats(t, a, b, h, q0, R, m.lse, m.dot);
    t.sync();
    flash_grad_products(t, m.g, m.q, m.dout, m.k, m.v, ldt, R, K, d);
    t.sync();
    t.for_each(R * K / 4, [&](int gi) {  // dropped probabilities to x, dS over dp
      const int r = gi / (K / 4), j = gi % (K / 4) * 4;
      float keep[4];
      flash_keep_row<4>(a.drop, s, b, h, q0 + r, k0 + j, keep);
      for (int u = 0; u < 4; ++u) {
        const int e = r * ldg + j + u;
        const FlashGrad f = flash_grad(m.g.s[e], m.g.dp[e], m.bias[j + u], m.lse[r], m.dot[r], keep[u], a.drop, s.scale);
        m.g.x[r * ldx + j + u] = store<T>(f.dropped);
        m.g.dp[e] = f.dscore;
      }
    });
    t.sync();
    t.gemm(TileRef<T>{m.g.x, ldx, true}, TileRef<T>{m.dout, ldt, false}, m.dv, ldf, K, d, R, true);
    t.sync();
    t.for_each(R * K, [&](int e) { m.g.x[e / K * ldx + e % K] = store<T>(m.g.dp[e / K * ldg + e % K]); });
    t.sync();
    t.gemm(TileRef<T>{m.g.x, ldx, true}, TileRef<T>{m.q, ldt, false}, m.dk, ldf, K, d, R, true);
  }
  t.sync();
  flash_store_rows(t, m.dk, ldf, nullptr, s, b, h, k0, K, a.dk);
  flash_store_rows(t, m.dv, ldf, nullptr, s, b, h, k0, K, a.dv);
}

// Query rows q0 .. q0 + 63 of head h of sample b: dq.
template <typename Tiles, typename T>
KILN_HD void flash_backward_query_block(const Tiles& t, const FlashBackwardArgs<T>& a, int64_t b, int64_t h,
                                        int64_t q0, char* smem) {
  constexpr int R = kFlashQueryPass.outer, K = kFlashQueryPass.inner;
  const FlashShape& s = a.shape;
  const int d = int(s.d), ldt = tile_ld<T>(d), ldf = tile_ld<float>(d), ldg = tile_ld<float>(K), ldx = tile_ld<T>(K);
  SmemCarver carver{smem};
  const auto m = FlashQueryPassSmem::carve<T>(carver, d);
  flash_load_rows(t, a.q, s, b, h, q0, R, m.q, ldt);
  flash_load_rows(t, a.dout, s, b, h, q0, R, m.dout, ldt);
  flash_load_row_stats(t, a, b, h, q0, R, m.lse, m.dot);
  t.for_each(R * d, [&](int e) { m.dq[e / d * ldf + e % d] = 0.0f; });
  for (int64_t k0 = 0; k0 < s.S; k0 += K) {
    t.sync();  // the last key block's tiles are read
    flash_load_rows(t, a.k, s, b, h, k0, K, m.k, ldt);
    flash_load_rows(t, a.v, s, b, h, k0, K, m.v, ldt);
    t.for_each(K, [&](int j) { m.bias[j] = flash_key_bias(s, b, k0 + j); });
    t.sync();
    flash_grad_products(t, m.g, m.q, m.dout, m.k, m.v, ldt, R, K, d);
    t.sync();
    t.for_each(R * K / 4, [&](int gi) {
      const int r = gi / (K / 4), j = gi % (K / 4) * 4;
      float keep[4];
      flash_keep_row<4>(a.drop, s, b, h, q0 + r, k0 + j, keep);
      for (int u = 0; u < 4; ++u) {
        const int e = r * ldg + j + u;
        const FlashGrad f = flash_grad(m.g.s[e], m.g.dp[e], m.bias[j + u], m.lse[r], m.dot[r], keep[u], a.drop, s.scale);
        m.g.x[r * ldx + j + u] = store<T>(f.dscore);
      }
    });
    t.sync();
    t.gemm(TileRef<T>{m.g.x, ldx, false}, TileRef<T>{m.k, ldt, false}, m.dq, ldf, R, d, K, true);
  }
  t.sync();
  flash_store_rows(t, m.dq, ldf, nullptr, s, b, h, q0, R, a.dq);
}

// The blocks of a launch: per (b, h) ceil(S / rows) blocks; block index (b, h, block).
KILN_HD inline int64_t flash_blocks(int64_t S, int rows) { return (S + rows - 1) / rows; }

// ---- the host policy ----

// A thread block's work on one CPU thread: each item of a phase in turn, syncs free, products
// as plain loops (operands loaded to f32, summed in f32 in k order); the warps' register products
// (warp_mma.h) emulated warp by warp.
struct HostTiles {
  template <typename X>
  using Regs = HostRegs<X, kFlashThreads>;
  template <typename F>
  void for_each(int n, F&& f) const {
    for (int i = 0; i < n; ++i) f(i);
  }
  // f(thread) for each thread of the block: per-thread work on its registers.
  template <typename F>
  void threads(F&& f) const {
    for (int th = 0; th < kFlashThreads; ++th) f(th);
  }
  void sync() const {}
  // c(x) += a(x) b(x), the fragments of each thread's registers x, warp by warp.
  template <typename X, typename FC, typename FA, typename FB>
  void mma(Regs<X>& r, FC c, FA a, FB b) const {
    for (int w = 0; w < kFlashWarps; ++w) host_warp::mma(r, w, c, a, b);
  }
  // v(x) over each group of four lanes: max, sum.
  template <typename X, typename F>
  void quad_max(Regs<X>& r, F v) const {
    for (int w = 0; w < kFlashWarps; ++w) host_warp::quad_reduce(r, w, v, [](float a, float b) { return fmaxf(a, b); });
  }
  template <typename X, typename F>
  void quad_sum(Regs<X>& r, F v) const {
    for (int w = 0; w < kFlashWarps; ++w) host_warp::quad_reduce(r, w, v, [](float a, float b) { return a + b; });
  }
  // b(x) = the B operand at rows k0.., columns n0.. of a row-major tile (b_frag_of_cols).
  template <typename X, typename F, typename T>
  void b_of_cols(Regs<X>& r, F b, const T* tile, int ld, int k0, int n0) const {
    threads([&](int th) { b(r[th]) = b_frag_of_cols(tile, ld, k0, n0, th % 32); });
  }
  // c (m, n; ldc) = (accumulate ? c : 0) + a (m, k) b (k, n).
  template <typename T>
  void gemm(TileRef<T> a, TileRef<T> b, float* c, int ldc, int m, int n, int k, bool accumulate) const {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int l = 0; l < k; ++l) {
          const T x = a.trans ? a.p[l * a.ld + i] : a.p[i * a.ld + l];
          const T y = b.trans ? b.p[j * b.ld + l] : b.p[l * b.ld + j];
          sum += load(x) * load(y);
        }
        c[i * ldc + j] = accumulate ? c[i * ldc + j] + sum : sum;
      }
  }
};

}  // namespace kiln::ops::cuda
