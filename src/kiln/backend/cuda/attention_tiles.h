// backend/cuda/attention_tiles.h — fused ("flash") attention as block algorithms written once over
// a tile policy: the CUDA kernel runs them with DeviceTiles (attention.cu: a thread block of
// kFlashThreads, shared memory, tensor-core products), the CPU backend with HostTiles (plain loops,
// one block at a time, the warps' register products emulated lane by lane), so the CPU runs the
// kernels' tiling, masking, online softmax, dropout and fragments, all but the tensor cores'
// summation order.
// This file: what both directions share and the host policy; the passes are attention_forward.h
// and attention_backward.h.
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
// first capture by value); sync(): the end of a phase. For the register products: Regs<X>, each
// thread's registers of type X; threads(f): f(th) on each thread th, its lanes running apart until
// the warp's next collective step (mma, quad_max, quad_sum, gather, b_of_cols, products), so
// lambdas that such a step follows capture loop indices by value; products<N, K, kind>: the block's
// 64 rows times a shared-memory tile, by warp_products or, on sm_90a, the warpgroup's wgmma. For
// the streamed rows: copy_async(dst, src, valid): 16 bytes from global to shared memory (zeros
// unless valid), landed once a later wait_copies<n>() leaves at most the n newest groups that
// commit_copies() closed in flight (then a sync() shows them to the other threads).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/hd_types.h"
#include "kiln/backend/cuda/vec_access.h"
#include "kiln/backend/cuda/warp_mma.h"
#include "kiln/backend/cuda/warpgroup_mma.h"
#include "kiln/core/philox.h"

namespace kiln::ops::cuda {

inline constexpr int kFlashWarps = 4;  // one warpgroup: on sm_90a the products are its wgmma
inline constexpr int kFlashThreads = 32 * kFlashWarps;
inline constexpr int64_t kFlashMaxHeadDim = 128;  // head_dim: a multiple of 16 up to this

// A pass's block: `outer` rows are the block's own (its warps hold them in registers), `inner` rows
// stream by.
struct FlashBlock {
  int outer, inner;
};

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
  // (B, heads, S, ceil(S / 32)): bit j % 32 of word j / 32 of row i of (b, h) set where (b, h, i, j)
  // is kept; the forward writes it, the backward reads it.
  uint32_t* keep_bits = nullptr;
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
  float* dot = nullptr;  // (B, heads, S): D = rowsum(dO o), the backward's first step (FlashRowDotsBody)
};

// Carves a pass's shared memory into its tiles, 32-byte aligned. With a null base it only counts:
// `used` is the bytes a block needs.
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

// Bit t (< 4) set where element first + t of global sample `sample` is kept: the words of its
// Philox blocks at counter (sample << 32) | (element / 4), as the CPU's dropout. The four lie in
// block first / 4 and, unless first is a multiple of 4, the next one.
KILN_HD inline uint32_t flash_keep4(const FlashDropout& d, uint64_t sample, int64_t first) {
  const uint64_t hi = sample << 32;
  const int64_t shift = first & 3;
  const auto a = d.rng.block(hi | uint64_t(uint32_t(first >> 2)));
  const auto b = shift ? d.rng.block(hi | uint64_t(uint32_t((first >> 2) + 1))) : a;
  uint32_t bits = 0;
  for (int64_t t = 0; t < 4; ++t) {
    const int64_t i = shift + t;
    const uint32_t word = i < 4 ? philox_word(a, i) : philox_word(b, i - 4);
    bits |= uint32_t(u32_to_unit_float(word) >= d.p) << t;
  }
  return bits;
}

// The keep bits of row i's columns j .. j + 3 of head h of sample b (all four without dropout).
KILN_HD inline uint32_t flash_keep_row4(const FlashDropout& d, const FlashShape& s, int64_t b, int64_t h, int64_t i,
                                        int64_t j) {
  if (d.p == 0.0f) return 0xfu;
  return flash_keep4(d, uint64_t(*d.sample_offset) + uint64_t(b), d.element_offset + (h * s.S + i) * s.S + j);
}

// The keep bits of row i's columns j .. j + 3 (j a multiple of 4) as the forward saved them (all
// four without dropout, and past the sequence, where nothing was saved and nothing is kept anyway).
KILN_HD inline uint32_t flash_saved_keep4(const FlashDropout& d, const FlashShape& s, int64_t b, int64_t h, int64_t i,
                                          int64_t j) {
  if (d.p == 0.0f || i >= s.S || j >= s.S) return 0xfu;
  const int64_t words = flash_keep_words(s.S);
  return d.keep_bits[((b * s.heads + h) * s.S + i) * words + j / 32] >> (j % 32) & 0xfu;
}

// The keep bits of a warp's C tiles (warp_mma.h) of 16 rows and 8-column tiles, tile j at bits
// 4 j .. 4 j + 3 of a word: each lane makes the bits of 4 neighbouring keys of one query per tile,
// keep4(query, first key) (the forward: Philox, a block where the row starts are multiples of 4,
// two elsewhere; the backward: the forward's saved bits), and the lanes that hold those elements
// fetch the word by a shuffle: a fourth of the blocks each lane would make for its own elements (a
// half, for the pairs of a row).
//   rows are queries (forward, query pass): lane l makes row l / 2's keys 4 (l % 2) .. of each tile;
//     element e of a lane's pair in row half u is bit 4 j + 2 (t % 2) + e of lane 16 u + 2 g + t / 2's;
//   rows are keys (key pass): lane l makes query column l / 4's keys 4 (l % 4) .. of the warp's 16;
//     element (key half u, query column 2 t + e) is bit 4 j + g % 4 of lane 8 t + 4 e + 2 u + g / 4's.
template <int kTiles, typename Keep4>
KILN_HD uint32_t flash_keep_made_for_rows(const Keep4& keep4, int64_t row0, int64_t key0, int lane) {
  uint32_t bits = 0;
  KILN_UNROLL for (int j = 0; j < kTiles; ++j) bits |= keep4(row0 + lane / 2, key0 + 8 * j + 4 * (lane % 2)) << (4 * j);
  return bits;
}
KILN_HD constexpr int flash_keep_lane_for_rows(int lane, int u) { return 16 * u + 2 * (lane / 4) + lane % 4 / 2; }
KILN_HD constexpr uint32_t flash_keep_bit_for_rows(uint32_t word, int lane, int j, int e) {
  return word >> (4 * j + 2 * (lane % 2) + e) & 1u;
}

// keep[u] of each thread: the word made for its row half u (registers X with `made` and `keep`).
template <typename Tiles, typename Regs>
KILN_HD void flash_gather_keep_for_rows(const Tiles& t, Regs& r) {
  KILN_UNROLL for (int u = 0; u < 2; ++u)
    t.gather(r, [](const auto& x) { return x.made; }, [u](auto& x) -> uint32_t& { return x.keep[u]; },
             [u](int lane) { return flash_keep_lane_for_rows(lane, u); });
}

template <int kTiles, typename Keep4>
KILN_HD uint32_t flash_keep_made_for_keys(const Keep4& keep4, int64_t query0, int64_t key0, int lane) {
  uint32_t bits = 0;
  KILN_UNROLL for (int j = 0; j < kTiles; ++j)
    bits |= keep4(query0 + 8 * j + lane / 4, key0 + 4 * (lane % 4)) << (4 * j);
  return bits;
}
KILN_HD constexpr int flash_keep_lane_for_keys(int lane, int u, int e) {
  return 8 * (lane % 4) + 4 * e + 2 * u + lane / 16;
}
KILN_HD constexpr uint32_t flash_keep_bit_for_keys(uint32_t word, int lane, int j) {
  return word >> (4 * j + lane / 4 % 4) & 1u;
}

// keep[2 u + e] of each thread: the word made for its key half u and query column e.
template <typename Tiles, typename Regs>
KILN_HD void flash_gather_keep_for_keys(const Tiles& t, Regs& r) {
  KILN_UNROLL for (int u = 0; u < 2; ++u)
    KILN_UNROLL for (int e = 0; e < 2; ++e)
      t.gather(r, [](const auto& x) { return x.made; }, [u, e](auto& x) -> uint32_t& { return x.keep[2 * u + e]; },
               [u, e](int lane) { return flash_keep_lane_for_keys(lane, u, e); });
}

// The forward's keep bits of key block k0 (64 keys, 8 tiles) of its warp's rows row0 .. into
// d.keep_bits: lanes 2 r and 2 r + 1 made row r's nibbles of keys 0-3 and 4-7 of each tile (`made`,
// `partner` the other's); the even one writes keys k0 .. k0 + 31, the odd one k0 + 32 .., their
// nibbles interleaved.
KILN_HD inline void flash_save_keep_bits(const FlashDropout& d, const FlashShape& s, int64_t b, int64_t h,
                                         int64_t row0, int64_t k0, int lane, uint32_t made, uint32_t partner) {
  const int64_t row = row0 + lane / 2, words = flash_keep_words(s.S), word = k0 / 32 + lane % 2;
  if (d.p == 0.0f || row >= s.S || word >= words) return;
  const uint32_t low = lane % 2 ? partner : made, high = lane % 2 ? made : partner;
  const int first = 4 * (lane % 2);
  uint32_t bits = 0;
  KILN_UNROLL for (int j = 0; j < 4; ++j)
    bits |= (low >> (4 * (first + j)) & 0xfu) << (8 * j) | (high >> (4 * (first + j)) & 0xfu) << (8 * j + 4);
  d.keep_bits[((b * s.heads + h) * s.S + row) * words + word] = bits;
}

// e^x for the probabilities: on the device the hardware's ex2.approx after one multiply (__expf;
// relative error a few 1e-6 where x > -20, far below the bf16 / f16 the probabilities are rounded
// to), two instructions where the accurate expf takes several, once per score; on the host expf.
KILN_HD inline float flash_exp(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  return expf(x);
#endif
}

// A key's bias: 0 for a token, -10000 for padding, -inf past the sequence (a tile's padding).
KILN_HD inline float flash_key_bias(const FlashShape& s, int64_t b, int64_t j) {
  if (j >= s.S) return -INFINITY;
  return s.mask[b * s.S + j] ? 0.0f : -10000.0f;
}

// rows x width values from rows `first` .. of a head into a tile of `width` columns (core_offset):
// the head's d columns, zeros past them (a head dim padded to the kernel's, flash_tile_dim) and past
// the sequence. Rows of whole packs go a 16-byte pack per item, a core's 8 rows by 8 consecutive
// items (so that a quarter warp's 16-byte stores fill one core's 128 bytes): the same values, an
// eighth of the bf16 loads; `async`, as asynchronous copies (copy_async: landed after the policy's
// wait_copies). Other rows are stored element by element at once.
template <typename Tiles, typename T>
KILN_HD void flash_load_rows(const Tiles& t, const FlashHeads<const T>& x, const FlashShape& s, int64_t b,
                             int64_t h, int64_t first, int rows, T* tile, int width, bool async = false) {
  const int d = int(s.d), pad = width - d;
  if (pad > 0) t.for_each(rows * pad, [=](int e) { tile[core_offset(width, e / pad, d + e % pad)] = store<T>(0.0f); });
  if (x.packs) {
    constexpr int W = kPackLanes<T>;
    const int per_row = d / W;
    t.for_each(rows * per_row, [=](int e) {
      const int r = e / (8 * per_row) * 8 + e % 8, c = e / 8 % per_row * W;
      const bool valid = first + r < s.S;
      T* to = tile + core_offset(width, r, c);
      if (async) t.copy_async(to, valid ? x.row(b, h, first + r) + c : x.p, valid);
      else write_pack(to, valid ? read_pack(x.row(b, h, first + r) + c) : Pack{});
    });
    return;
  }
  t.for_each(rows * d, [=](int e) {
    const int r = e / d, c = e % d;
    tile[core_offset(width, r, c)] = first + r < s.S ? x.row(b, h, first + r)[c] : store<T>(0.0f);
  });
}

// rows x d values of a tile of `width` columns into rows `first` .. of a head, nothing past the
// sequence. Rows of whole packs (FlashHeads::packs) go a 16-byte pack per item.
template <typename Tiles, typename T>
KILN_HD void flash_store_rows(const Tiles& t, const T* tile, int width, const FlashShape& s, int64_t b, int64_t h,
                              int64_t first, int rows, const FlashHeads<T>& x) {
  const int d = int(s.d);
  if (x.packs) {
    constexpr int W = kPackLanes<T>;
    const int per_row = d / W;
    t.for_each(rows * per_row, [=](int e) {
      const int r = e / per_row, c = e % per_row * W;
      if (first + r < s.S) write_pack(x.row(b, h, first + r) + c, read_pack(tile + core_offset(width, r, c)));
    });
    return;
  }
  t.for_each(rows * d, [=](int e) {
    const int r = e / d, c = e % d;
    if (first + r < s.S) x.row(b, h, first + r)[c] = tile[core_offset(width, r, c)];
  });
}

// c(x)[j] (j < N / 8) += the sum over k-steps kk < K / 16 of a(x, kk) times B's rows 16 kk .. of a
// tile of `cols` columns (warp_mma.h's kind): each warp's 16 rows by m16n8k16 products, a B
// fragment loaded per product, by the lanes (a tile's rows) or by the warp (its columns, ldmatrix
// on the device). Every policy's products without warpgroup ones (wgmma).
template <int N, int K, BOf kind, typename Tiles, typename Regs, typename FC, typename FA, typename T>
KILN_HD void warp_products(const Tiles& t, Regs& r, FC c, FA a, const T* tile, int cols) {
  KILN_UNROLL for (int j = 0; j < N / 8; ++j) {
    KILN_UNROLL for (int kk = 0; kk < K / 16; ++kk) {
      if constexpr (kind == BOf::rows)
        t.threads([&r, tile, cols, j, kk](int th) { r[th].b = b_frag_of_rows(tile, cols, 8 * j, 16 * kk, th % 32); });
      else
        t.b_of_cols(r, [](auto& x) -> auto& { return x.b; }, tile, cols, 16 * kk, 8 * j);
      t.mma(r, [c, j](auto& x) -> CFrag& { return c(x)[j]; }, [a, kk](auto& x) -> const auto& { return a(x, kk); },
            [](auto& x) -> const auto& { return x.b; });
    }
  }
}

// A pass's streamed blocks i < blocks, double-buffered: load(i, buffer) issues block i's
// asynchronous copies (and writes its small per-row values) into buffer i % 2 while body(i - 1, ...)
// has the other; body(i, buffer) runs once every thread's copies of block i have landed.
template <typename Tiles, typename Load, typename Body>
KILN_HD void flash_stream_blocks(const Tiles& t, int64_t blocks, Load&& load, Body&& body) {
  load(int64_t{0}, 0);
  t.commit_copies();
  for (int64_t i = 0; i < blocks; ++i) {
    t.sync();  // the block before's buffer is read by every thread (and the first time, the block's own rows)
    if (i + 1 < blocks) load(i + 1, int((i + 1) % 2));
    t.commit_copies();
    t.template wait_copies<1>();  // this thread's copies of block i
    t.sync();
    body(i, int(i % 2));
  }
}

// The blocks of a launch: per (b, h) ceil(S / rows) blocks; block index (b, h, block).
KILN_HD inline int64_t flash_blocks(int64_t S, int rows) { return (S + rows - 1) / rows; }

// The head dim the kernels are built for that takes d (a multiple of 16 up to kFlashMaxHeadDim, as
// the caller has checked): their register arrays are sized by it, and four sizes keep the kernels
// few; the columns past d are zeros in every tile.
KILN_HD constexpr int flash_tile_dim(int64_t d) { return d <= 16 ? 16 : d <= 32 ? 32 : d <= 64 ? 64 : 128; }

// fn.template operator()<D>() with D = flash_tile_dim(d).
template <typename Fn>
void with_flash_head_dim(int64_t d, Fn&& fn) {
  switch (flash_tile_dim(d)) {
    case 16: return fn.template operator()<16>();
    case 32: return fn.template operator()<32>();
    case 64: return fn.template operator()<64>();
    default: return fn.template operator()<128>();
  }
}

// ---- the host policy ----

// The host policies' asynchronous copies: each lands at once, on the thread of the phase's item that
// issues it.
struct ImmediateCopies {
  template <typename T>
  void copy_async(T* dst, const T* src, bool valid) const {
    write_pack(dst, valid ? read_pack(src) : Pack{});
  }
  void commit_copies() const {}
  template <int n>
  void wait_copies() const {}
};

// A thread block's work on one CPU thread: each item of a phase in turn, syncs free, the warps'
// register products (warp_mma.h) emulated warp by warp.
struct HostTiles : ImmediateCopies {
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
  // to(x) = from(x') for each thread, x' the registers of lane src(lane) of its warp.
  template <typename X, typename From, typename To, typename Src>
  void gather(Regs<X>& r, From from, To to, Src src) const {
    for (int w = 0; w < kFlashWarps; ++w) host_warp::gather(r, w, from, to, src);
  }
  // b(x) = the B operand at rows k0.., columns n0.. of a tile (b_frag_of_cols).
  template <typename X, typename F, typename T>
  void b_of_cols(Regs<X>& r, F b, const T* tile, int cols, int k0, int n0) const {
    threads([&](int th) { b(r[th]) = b_frag_of_cols(tile, cols, k0, n0, th % 32); });
  }
  // c(x)[j] += a(x, kk) B: warp_products.
  template <int N, int K, BOf kind, typename X, typename FC, typename FA, typename T>
  void products(Regs<X>& r, FC c, FA a, const T* tile, int cols) const {
    warp_products<N, K, kind>(*this, r, c, a, tile, cols);
  }
};

}  // namespace kiln::ops::cuda
