// backend/cuda/attention_forward.h — the fused attention's forward (attention_tiles.h) as
// FlashAttention-2 runs it: a block of 64 query rows of (b, h), warp w holding rows 16 w .. 16 w + 15
// in registers as mma.sync fragments (warp_mma.h), key blocks of 64 streamed through shared memory.
// The scores, the probabilities and the context's running sum never leave registers: the score
// product's C fragments become the context product's A fragments where they lie, and a row's max
// and sum are combined over the four lanes that hold it by shuffles.
//
// Per key block, at head dim d: the scores Q K^T and the context P V, each 64 x 64 x d, as the
// policy's products (K's rows as B, V's columns): on sm_90a d / 16 and 4 wgmma of the warpgroup,
// elsewhere 8 d / 16 m16n8k16 products per warp, their B fragments read from shared memory by each
// warp; every score touched once in registers; with dropout, a Philox block per four of them
// (attention_tiles.h, the keep bits), which are saved for the backward, a bit each.
#pragma once
#include <cmath>
#include <cstdint>

#include "kiln/backend/cuda/attention_tiles.h"

namespace kiln::ops::cuda {

inline constexpr FlashBlock kFlashForward{64, 64};  // query rows, key rows

// The block's shared memory: the query rows (then the context rounded to T); two buffers of a key
// block's K and V rows and its keys' biases (flash_stream_blocks).
struct FlashForwardSmem {
  template <typename T>
  struct Tiles {
    T *q, *k[2], *v[2];  // (64, d) each, core_offset's layout
    float* bias[2];      // (64)
  };
  template <typename T>
  KILN_HD static Tiles<T> carve(SmemCarver& c, int d) {
    const FlashBlock f = kFlashForward;
    Tiles<T> t;
    t.q = c.take<T>(f.outer * d);
    for (int buffer = 0; buffer < 2; ++buffer) {
      t.k[buffer] = c.take<T>(f.inner * d);
      t.v[buffer] = c.take<T>(f.inner * d);
      t.bias[buffer] = c.take<float>(f.inner);
    }
    return t;
  }
};

template <typename T>
KILN_HD inline int64_t flash_forward_smem_bytes(int d) {
  SmemCarver c;
  FlashForwardSmem::carve<T>(c, flash_tile_dim(d));
  return c.used;
}

// A thread's registers at head dim D: its warp's 16 query rows as A fragments, its elements of the
// scores (16 rows x 64 keys, 8 C tiles), of the dropped probabilities (4 A fragments) and of the
// context's running sum (16 x D); per row half u (rows g and g + 8 of the warp's 16) the running
// max and sum (its own elements' part until the end), the key block's max and the rescale.
template <typename T, int D>
struct FlashForwardRegs {
  static constexpr int kSteps = D / 16, kKeyTiles = kFlashForward.inner / 8, kKeySteps = kFlashForward.inner / 16,
                       kOutTiles = D / 8;
  AFrag<T> q[kSteps];
  CFrag s[kKeyTiles];
  AFrag<T> p[kKeySteps];
  CFrag o[kOutTiles];
  BFrag<T> b;  // a product's B operand
  float max[2], sum[2], block_max[2], rescale[2];
  uint32_t made, partner, keep[2];  // the keep bits this lane made, lane ^ 1 made, of its row halves
};

// S = Q K^T of the warps' rows and the key block's K rows in m.k.
template <int D, typename Tiles, typename Regs, typename T>
KILN_HD void flash_forward_scores(const Tiles& t, Regs& r, const T* k) {
  using X = FlashForwardRegs<T, D>;
  t.threads([&r](int th) { KILN_UNROLL for (int j = 0; j < X::kKeyTiles; ++j) r[th].s[j] = CFrag{}; });
  t.template products<kFlashForward.inner, D, BOf::rows>(
      r, [](X& x) -> CFrag* { return x.s; }, [](X& x, int kk) -> const AFrag<T>& { return x.q[kk]; }, k, D);
}

// O += P V of the warps' dropped probabilities and the key block's V rows in m.v.
template <int D, typename Tiles, typename Regs, typename T>
KILN_HD void flash_forward_context(const Tiles& t, Regs& r, const T* v) {
  using X = FlashForwardRegs<T, D>;
  t.template products<D, kFlashForward.inner, BOf::cols>(
      r, [](X& x) -> CFrag* { return x.o; }, [](X& x, int c) -> const AFrag<T>& { return x.p[c]; }, v, D);
}

// One thread's part of the online softmax for key block k0 (its scores' block maxima combined over
// the quad already): the new running max and the rescale of what came before, exp(s - max) summed
// in f32, dropped and rounded to T as the context product's A, the context's sum rescaled.
template <int D, typename T>
KILN_HD void flash_forward_softmax(FlashForwardRegs<T, D>& x, const FlashForwardArgs<T>& a, int lane) {
  using X = FlashForwardRegs<T, D>;
  float part[2] = {0.0f, 0.0f};
  KILN_UNROLL for (int u = 0; u < 2; ++u) {
    const float mx = fmaxf(x.max[u], x.block_max[u]);
    x.rescale[u] = flash_exp(x.max[u] - mx);
    x.max[u] = mx;
  }
  KILN_UNROLL for (int j = 0; j < X::kKeyTiles; ++j) {
    KILN_UNROLL for (int u = 0; u < 2; ++u) {
      KILN_UNROLL for (int e = 0; e < 2; ++e) {
        float& p = x.s[j].c[2 * u + e];
        p = flash_exp(p - x.max[u]);
        part[u] += p;
        p *= float(flash_keep_bit_for_rows(x.keep[u], lane, j, e)) * a.drop.scale;
      }
    }
  }
  KILN_UNROLL for (int c = 0; c < X::kKeySteps; ++c) x.p[c] = a_frag_of<T>(x.s[2 * c], x.s[2 * c + 1]);
  KILN_UNROLL for (int n = 0; n < X::kOutTiles; ++n)
    KILN_UNROLL for (int i = 0; i < 4; ++i) x.o[n].c[i] *= x.rescale[i / 2];
  KILN_UNROLL for (int u = 0; u < 2; ++u) x.sum[u] = x.sum[u] * x.rescale[u] + part[u];
}

// Query rows q0 .. q0 + 63 of head h of sample b at head dim D: context and lse.
template <int D, typename Tiles, typename T>
KILN_HD void flash_forward_rows(const Tiles& t, const FlashForwardArgs<T>& a, int64_t b, int64_t h, int64_t q0,
                                char* smem) {
  using X = FlashForwardRegs<T, D>;
  constexpr int R = kFlashForward.outer, C = kFlashForward.inner;
  const FlashShape& s = a.shape;
  SmemCarver carver{smem};
  const auto m = FlashForwardSmem::carve<T>(carver, D);
  typename Tiles::template Regs<X> r;
  flash_load_rows(t, a.q, s, b, h, q0, R, m.q, D);
  t.sync();
  t.threads([&](int th) {
    X& x = r[th];
    KILN_UNROLL for (int kk = 0; kk < X::kSteps; ++kk) x.q[kk] = a_frag(m.q, D, th / 32 * 16, 16 * kk, th % 32);
    KILN_UNROLL for (int n = 0; n < X::kOutTiles; ++n) x.o[n] = CFrag{};
    KILN_UNROLL for (int u = 0; u < 2; ++u) x.max[u] = -INFINITY, x.sum[u] = 0.0f;
  });
  const auto load = [&](int64_t i, int buffer) {
    flash_load_rows(t, a.k, s, b, h, i * C, C, m.k[buffer], D, true);
    flash_load_rows(t, a.v, s, b, h, i * C, C, m.v[buffer], D, true);
    float* bias = m.bias[buffer];
    t.for_each(C, [=, &s](int j) { bias[j] = flash_key_bias(s, b, i * C + j); });
  };
  flash_stream_blocks(t, flash_blocks(s.S, C), load, [&](int64_t i, int buffer) {
    const int64_t k0 = i * C;
    const float* bias = m.bias[buffer];
    flash_forward_scores<D>(t, r, m.k[buffer]);
    t.threads([&r, &a, bias, b, h, q0, k0](int th) {  // scale and bias, the thread's row maxima, keep bits
      X& x = r[th];
      const auto philox = [&](int64_t i, int64_t j) { return flash_keep_row4(a.drop, a.shape, b, h, i, j); };
      x.made = flash_keep_made_for_rows<X::kKeyTiles>(philox, q0 + th / 32 * 16, k0, th % 32);
      x.block_max[0] = x.block_max[1] = -INFINITY;
      KILN_UNROLL for (int j = 0; j < X::kKeyTiles; ++j)
        KILN_UNROLL for (int i = 0; i < 4; ++i) {
          float& v = x.s[j].c[i];
          v = v * a.shape.scale + bias[8 * j + c_col(th % 32, i)];
          x.block_max[i / 2] = fmaxf(x.block_max[i / 2], v);
        }
    });
    t.quad_max(r, [](X& x) -> float& { return x.block_max[0]; });
    t.quad_max(r, [](X& x) -> float& { return x.block_max[1]; });
    flash_gather_keep_for_rows(t, r);
    t.gather(r, [](const X& x) { return x.made; }, [](X& x) -> uint32_t& { return x.partner; },
             [](int lane) { return lane ^ 1; });
    t.threads([&r, &a, b, h, q0, k0](int th) {
      X& x = r[th];
      flash_save_keep_bits(a.drop, a.shape, b, h, q0 + th / 32 * 16, k0, th % 32, x.made, x.partner);
      flash_forward_softmax<D>(x, a, th % 32);
    });
    flash_forward_context<D>(t, r, m.v[buffer]);
  });
  t.quad_sum(r, [](X& x) -> float& { return x.sum[0]; });
  t.quad_sum(r, [](X& x) -> float& { return x.sum[1]; });
  t.threads([&](int th) {  // lse, and the context over the sums rounded to T into the query rows' tile
    X& x = r[th];
    const int lane = th % 32, row0 = th / 32 * 16;
    KILN_UNROLL for (int u = 0; u < 2; ++u) {
      const int64_t i = q0 + row0 + c_row(lane, 2 * u);
      if (lane % 4 == 0 && i < s.S) a.lse[(b * s.heads + h) * s.S + i] = x.max[u] + logf(x.sum[u]);
    }
    const float inv[2] = {1.0f / x.sum[0], 1.0f / x.sum[1]};
    KILN_UNROLL for (int n = 0; n < X::kOutTiles; ++n)
      KILN_UNROLL for (int i = 0; i < 4; ++i)
        m.q[c_offset(D, row0, 8 * n, lane, i)] = store<T>(x.o[n].c[i] * inv[i / 2]);
  });
  t.sync();
  flash_store_rows(t, m.q, D, s, b, h, q0, R, a.o);
}

// The forward of one block on the host (HostTiles or a test's policy).
template <typename Tiles, typename T>
void flash_forward_block(const Tiles& t, const FlashForwardArgs<T>& a, int64_t b, int64_t h, int64_t q0, char* smem) {
  with_flash_head_dim(a.shape.d, [&]<int D>() { flash_forward_rows<D>(t, a, b, h, q0, smem); });
}

}  // namespace kiln::ops::cuda
