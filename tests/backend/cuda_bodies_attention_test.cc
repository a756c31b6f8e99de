// The fused attention kernel's block algorithms (attention_forward.h, attention_backward.h) on the
// CPU: the tiles' dropout against the CPU dropout op's mask bit for bit, the shared memory each
// pass carves (what the kernel asks the device for), the 16-byte tile addresses its products read, and the
// blocks under policies that run the threads in other orders (a missing barrier shows). Their
// results against float64 and the unfused ops: ParityFlashAttention.*; the fragments: WarpMma.*.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cuda/attention_backward.h"
#include "kiln/backend/cuda/attention_forward.h"
#include "kiln/core/context.h"
#include "cuda_bodies.h"
#include "host_warpgroup_tiles.h"
#include "random_fill.h"

namespace kiln {
namespace {

using namespace ops::cuda;
using namespace testing::cuda_bodies;
using testing::max_rel_error;
using testing::random_normal;

// The bits flash_keep_row4 keeps are what ops::dropout_forward keeps of the (B, heads, S, S)
// probabilities, for heads that start anywhere in a sample and rows that straddle Philox blocks.
TEST(CudaBodies, AttentionTileDropoutIsTheDropoutOpsMaskBitForBit) {
  Context cpu = cpu_context();
  for (const int64_t S : {7, 13, 64}) {
    const int64_t B = 3, heads = 2, first_head = 1, n = B * heads * S * S;
    int64_t first_sample = 1000;
    const Tensor offset = Tensor::view(&first_sample, {1}, DType::i64);
    const ops::DropoutMask mask{0.3f, RngStream{17, rng_stream(RngPurpose::dropout, 5, 0)}, offset, B,
                                first_head * S * S};
    std::vector<float> ones(static_cast<size_t>(n), 1.0f), kept(static_cast<size_t>(n));
    Tensor x = Tensor::view(ones.data(), {B, heads, S, S}), y = Tensor::view(kept.data(), {B, heads, S, S});
    ops::dropout_forward(cpu, x, mask, y);

    const FlashDropout d{mask.rng, &first_sample, mask.element_offset, mask.p, 1.0f / (1.0f - mask.p)};
    FlashShape s;
    s.B = B, s.heads = heads, s.S = S;
    int64_t dropped = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t j = 0; j < S; j += 4) {
            const uint32_t keep = flash_keep_row4(d, s, b, h, i, j);
            for (int64_t u = 0; u < 4 && j + u < S; ++u) {
              const float want = kept[size_t(((b * heads + h) * S + i) * S + j + u)];
              ASSERT_EQ((keep >> u & 1u) != 0, want != 0.0f) << "S " << S << " b " << b << " h " << h << " i " << i;
              dropped += want == 0.0f;
            }
          }
    EXPECT_GT(dropped, n / 5);
    EXPECT_LT(dropped, n * 2 / 5);
  }
}

// Each lane's elements of a warp's C tiles get their keep bits from the lane that made them:
// rows as queries and rows as keys, every element of 16 rows and 4 tiles against flash_keep_row4
// at its own (query, key), for row starts that are and are not multiples of 4.
TEST(CudaBodies, AttentionKeepBitsReachTheLanesThatHoldTheirElements) {
  constexpr int kTiles = 4;
  for (const int64_t S : {128, 130}) {
    int64_t first_sample = 3;
    const FlashDropout d{RngStream{7, 8}, &first_sample, 2 * S * S, 0.4f, 1.0f / 0.6f};
    FlashShape s;
    s.B = 1, s.heads = 2, s.S = S;
    const int64_t row0 = 48, col0 = 32;  // the warp's first query and key (or key and query)
    struct Keep {
      uint32_t made, keep[4];
    };
    HostTiles t;
    HostTiles::Regs<Keep> rows, keys;
    const auto philox = [&](int64_t i, int64_t j) { return flash_keep_row4(d, s, 0, 1, i, j); };
    t.threads([&](int th) {
      rows[th].made = flash_keep_made_for_rows<kTiles>(philox, row0, col0, th % 32);
      keys[th].made = flash_keep_made_for_keys<kTiles>(philox, row0, col0, th % 32);
    });
    flash_gather_keep_for_rows(t, rows);
    flash_gather_keep_for_keys(t, keys);
    for (int lane = 0; lane < 32; ++lane)
      for (int j = 0; j < kTiles; ++j)
        for (int i = 0; i < 4; ++i) {
          const int r = c_row(lane, i), c = 8 * j + c_col(lane, i);
          const uint32_t query_row = flash_keep_row4(d, s, 0, 1, row0 + r, col0 + c) & 1u;  // (query r, key c)
          const uint32_t key_row = flash_keep_row4(d, s, 0, 1, row0 + c, col0 + r) & 1u;    // (key r, query c)
          ASSERT_EQ(flash_keep_bit_for_rows(rows[lane].keep[i / 2], lane, j, i % 2), query_row) << S << " " << lane;
          ASSERT_EQ(flash_keep_bit_for_keys(keys[lane].keep[i], lane, j), key_row) << S << " " << lane;
        }
  }
}

// The bits the forward saves of a key block (64 keys, lanes' nibbles interleaved into words) read
// back as flash_keep_row4 makes them, at every (query, key) of a block's 64 rows, for every key
// block of a row of S keys (S not a multiple of 32 or 64: the last words partly past the sequence).
TEST(CudaBodies, AttentionSavedKeepBitsReadBackAsMade) {
  constexpr int kTiles = kFlashForward.inner / 8;
  const int64_t S = 150, words = ops::flash_keep_words(S), row0 = 64;
  std::vector<uint32_t> saved(size_t(2 * S * words));
  int64_t first_sample = 9;
  const FlashDropout d{RngStream{5, 6}, &first_sample, 0, 0.3f, 1.0f / 0.7f, saved.data()};
  FlashShape s;
  s.B = 1, s.heads = 2, s.S = S;
  struct Keep {
    uint32_t made, partner;
  };
  HostTiles t;
  HostTiles::Regs<Keep> r;
  const auto philox = [&](int64_t i, int64_t j) { return flash_keep_row4(d, s, 0, 1, i, j); };
  for (int64_t k0 = 0; k0 < S; k0 += kFlashForward.inner) {
    t.threads([&](int th) {
      r[th].made = flash_keep_made_for_rows<kTiles>(philox, row0 + th / 32 * 16, k0, th % 32);
    });
    t.gather(r, [](const Keep& x) { return x.made; }, [](Keep& x) -> uint32_t& { return x.partner; },
             [](int lane) { return lane ^ 1; });
    t.threads([&](int th) {
      flash_save_keep_bits(d, s, 0, 1, row0 + th / 32 * 16, k0, th % 32, r[th].made, r[th].partner);
    });
  }
  int64_t dropped = 0;
  for (int64_t i = row0; i < row0 + 64; ++i)
    for (int64_t j = 0; j < S; j += 4) {
      ASSERT_EQ(flash_saved_keep4(d, s, 0, 1, i, j), philox(i, j)) << "row " << i << " key " << j;
      dropped += 4 - std::popcount(philox(i, j));
    }
  EXPECT_GT(dropped, 64 * S / 5);  // the bits are not all one way
}

// The passes' shared memory for each head dim: what the host policy carves is what a block of the
// kernel asks for, and a head dim of 64 fits every GPU the backend is built for (99 KiB on sm_89).
TEST(CudaBodies, AttentionPassesFitTheSharedMemoryOfTheirGpus) {
  for (int d : {16, 32, 64, 128}) {
    const int64_t forward = flash_forward_smem_bytes<bf16_t>(d), backward = flash_backward_smem_bytes<bf16_t>(d);
    EXPECT_LE(forward, 227 * 1024) << d;                               // sm_90's most per block
    EXPECT_LE(backward, 227 * 1024) << d;
    if (d <= 64) {
      EXPECT_LE(forward, 99 * 1024) << d;
      EXPECT_LE(backward, 99 * 1024) << d;
    }
  }
}

// The host policy, counting the products whose tile is not 16-byte aligned in the block's shared
// memory (which the kernel aligns to 128): wgmma's descriptors drop an address's low 4 bits, and
// ldmatrix's row addresses, a core's rows of 16 bytes from the tile (core_offset), must be 16-byte
// aligned.
struct ProductAlignmentTiles : HostTiles {
  const char* smem;
  std::shared_ptr<int> broken = std::make_shared<int>(0), calls = std::make_shared<int>(0);
  template <int N, int K, BOf kind, typename X, typename FC, typename FA, typename T>
  void products(Regs<X>& r, FC c, FA a, const T* tile, int cols) const {
    ++*calls;
    *broken += (reinterpret_cast<const char*>(tile) - smem) % 16 != 0;
    HostTiles::products<N, K, kind>(r, c, a, tile, cols);
  }
};

// Every product of every pass, for every head dim the kernel takes, in bf16 and f16.
TEST(CudaBodies, AttentionProductsReadTilesAt16ByteAddresses) {
  const auto check = [](auto tag) {
    using T = decltype(tag);
    const int64_t S = 70;  // a whole block and a partial one
    const std::vector<int32_t> mask(static_cast<size_t>(S), 1);
    for (int64_t d = 16; d <= kFlashMaxHeadDim; d += 16) {
      const std::vector<T> x = stored<T>(random_normal(S * d, uint32_t(d)));
      std::vector<T> out(size_t(S * d));
      std::vector<float> lse(static_cast<size_t>(S));
      const FlashHeads<const T> in{x.data(), d, S * d, d};
      const FlashHeads<T> grad{out.data(), d, S * d, d};
      const FlashShape shape{1, 1, S, d, 0.125f, mask.data()};
      const FlashForwardArgs<T> fa{shape, in, in, in, grad, lse.data(), {}};
      std::vector<float> dots(static_cast<size_t>(S));
      const FlashBackwardArgs<T> ba{shape, in, in, in, in, in, grad, grad, grad, lse.data(), {}, dots.data()};
      const int64_t bytes = std::max(flash_forward_smem_bytes<T>(int(d)), flash_backward_smem_bytes<T>(int(d)));
      std::vector<char> smem(static_cast<size_t>(bytes));
      const ProductAlignmentTiles tiles{{}, smem.data()};
      for (int64_t first = 0; first < S; first += 64) {
        flash_forward_block(tiles, fa, 0, 0, first, smem.data());
        flash_backward_key_block(tiles, ba, 0, 0, first, smem.data());
        flash_backward_query_block(tiles, ba, 0, 0, first, smem.data());
      }
      EXPECT_EQ(*tiles.broken, 0) << "head dim " << d << ", " << sizeof(T) << "-byte values";
      EXPECT_GT(*tiles.calls, 0);
    }
  };
  check(bf16_t{});
  check(f16_t{});
}

// HostTiles with each phase's items in reverse order: a phase whose items read what another item
// of the same phase writes (a race between the kernel's threads, which no barrier orders) gives
// other results than in order.
struct ReversedHostTiles : HostTiles {
  template <typename F>
  void for_each(int n, F&& f) const {
    for (int i = n - 1; i >= 0; --i) f(i);
  }
  template <typename F>
  void threads(F&& f) const {
    for (int th = kFlashThreads - 1; th >= 0; --th) f(th);
  }
};

// The kernel's thread block on one CPU thread as its threads could run between two barriers: an
// item of a phase goes to thread i % kFlashThreads. At each sync the warps run, the last one first,
// each all of its work since the last sync; within a warp the lanes run apart, the last first, up
// to each of the warp's collective steps (mma, quad_max, quad_sum, gather), which then runs for all
// 32. A phase that reads what an earlier phase writes with no sync (or, within a warp, no
// collective step) between them reads it before other threads have written it.
class ThreadMajorTiles : public ImmediateCopies {
 public:
  template <typename X>
  using Regs = HostRegs<X, kFlashThreads>;
  template <typename F>
  void for_each(int n, F f) const {
    lanes([n, f](int thread) {
      for (int i = thread; i < n; i += kFlashThreads) f(i);
    });
  }
  template <typename F>
  void threads(F f) const {
    lanes(f);
  }
  void sync() const {
    for (int w = kFlashWarps - 1; w >= 0; --w) {
      std::vector<const Work*> apart;
      const auto run_apart = [&] {
        for (int lane = 31; lane >= 0; --lane)
          for (const Work* work : apart) work->f(32 * w + lane);
        apart.clear();
      };
      for (const Work& work : *work_) {
        if (!work.collective) {
          apart.push_back(&work);
          continue;
        }
        run_apart();
        work.f(w);
      }
      run_apart();
    }
    work_->clear();
  }
  template <typename X, typename FC, typename FA, typename FB>
  void mma(Regs<X>& r, FC c, FA a, FB b) const {
    work_->push_back({[&r, c, a, b](int w) { host_warp::mma(r, w, c, a, b); }, true});
  }
  template <typename X, typename F>
  void quad_max(Regs<X>& r, F v) const {
    work_->push_back(
        {[&r, v](int w) { host_warp::quad_reduce(r, w, v, [](float x, float y) { return fmaxf(x, y); }); }, true});
  }
  template <typename X, typename F>
  void quad_sum(Regs<X>& r, F v) const {
    work_->push_back(
        {[&r, v](int w) { host_warp::quad_reduce(r, w, v, [](float x, float y) { return x + y; }); }, true});
  }
  template <typename X, typename From, typename To, typename Src>
  void gather(Regs<X>& r, From from, To to, Src src) const {
    work_->push_back({[&r, from, to, src](int w) { host_warp::gather(r, w, from, to, src); }, true});
  }
  template <typename X, typename F, typename T>
  void b_of_cols(Regs<X>& r, F b, const T* tile, int cols, int k0, int n0) const {
    lanes([&r, b, tile, cols, k0, n0](int thread) { b(r[thread]) = b_frag_of_cols(tile, cols, k0, n0, thread % 32); });
  }
  template <int N, int K, BOf kind, typename X, typename FC, typename FA, typename T>
  void products(Regs<X>& r, FC c, FA a, const T* tile, int cols) const {
    warp_products<N, K, kind>(*this, r, c, a, tile, cols);
  }
  void flush() const { sync(); }

 private:
  // f(thread) of one thread, or f(warp) of a warp's collective step.
  struct Work {
    std::function<void(int)> f;
    bool collective = false;
  };
  template <typename F>
  void lanes(F f) const {
    work_->push_back({std::move(f), false});
  }
  std::shared_ptr<std::vector<Work>> work_ = std::make_shared<std::vector<Work>>();
};

// HostTiles whose asynchronous copies land only when a wait_copies<n> leaves at most n newer groups
// in flight (in groups, as commit_copies closed them): a read of a copy's tile before its wait
// reads what the tile held before.
struct LateCopyTiles : HostTiles {
  struct Copy {
    void* dst;
    Pack pack;
  };
  std::shared_ptr<std::vector<std::vector<Copy>>> groups = std::make_shared<std::vector<std::vector<Copy>>>(1);
  template <typename T>
  void copy_async(T* dst, const T* src, bool valid) const {
    groups->back().push_back({dst, valid ? read_pack(src) : Pack{}});
  }
  void commit_copies() const { groups->emplace_back(); }
  template <int n>
  void wait_copies() const {
    while (int(groups->size()) - 1 > n) {  // the open group is not in flight
      for (const Copy& c : groups->front()) write_pack(c.dst, c.pack);
      groups->erase(groups->begin());
    }
  }
};

// The end of a thread block: what a policy deferred runs.
template <typename Tiles>
void finish(const Tiles& tiles) {
  if constexpr (requires { tiles.flush(); }) tiles.flush();
}

// Every block of every pass of (B 2, heads 2, S 75, d 32) in bf16 with padding and dropout under
// `tiles`: the context, the lse, dq, dk, dv.
template <typename Tiles>
std::vector<std::vector<bf16_t>> attention_blocks(const Tiles& tiles, std::vector<float>& lse) {
  const int64_t B = 2, heads = 2, S = 75, d = 32, width = heads * d, n = B * S * width;
  static int64_t first_sample = 40;
  static const std::vector<int32_t> mask = [] {
    std::vector<int32_t> m(2 * 75, 1);
    for (int64_t j = 60; j < 75; ++j) m[size_t(75 + j)] = 0;
    return m;
  }();
  std::vector<std::vector<bf16_t>> t = {stored<bf16_t>(random_normal(n, 61)), stored<bf16_t>(random_normal(n, 62)),
                                        stored<bf16_t>(random_normal(n, 63)), std::vector<bf16_t>(size_t(n)),
                                        stored<bf16_t>(random_normal(n, 64)), std::vector<bf16_t>(size_t(n)),
                                        std::vector<bf16_t>(size_t(n)), std::vector<bf16_t>(size_t(n))};
  // Rows of whole 16-byte packs, as the ops make them (the streamed rows' asynchronous copies).
  const auto heads_of = [&](std::vector<bf16_t>& v) {
    return FlashHeads<bf16_t>{v.data(), width, S * width, d, true};
  };
  const auto in = [&](std::vector<bf16_t>& v) { return FlashHeads<const bf16_t>{v.data(), width, S * width, d, true}; };
  const FlashShape shape{B, heads, S, d, 0.17f, mask.data()};
  std::vector<uint32_t> keep_bits(size_t(B * heads * S * ops::flash_keep_words(S)));
  const FlashDropout drop{RngStream{3, 4}, &first_sample, 0, 0.2f, 1.0f / 0.8f, keep_bits.data()};
  lse.assign(size_t(B * heads * S), 0.0f);
  const FlashForwardArgs<bf16_t> fa{shape, in(t[0]), in(t[1]), in(t[2]), heads_of(t[3]), lse.data(), drop};
  std::vector<float> dots(size_t(B * heads * S));
  const FlashBackwardArgs<bf16_t> ba{shape,          in(t[0]),       in(t[1]),       in(t[2]),   in(t[3]), in(t[4]),
                                     heads_of(t[5]), heads_of(t[6]), heads_of(t[7]), lse.data(), drop, dots.data()};
  std::vector<char> smem(size_t(std::max(flash_forward_smem_bytes<bf16_t>(d), flash_backward_smem_bytes<bf16_t>(d))));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t q0 = 0; q0 < S; q0 += kFlashForward.outer) {
        flash_forward_block(tiles, fa, b, h, q0, smem.data());
        finish(tiles);
      }
  for (int64_t i = 0; i < B * heads * S; ++i) FlashRowDotsBody<bf16_t>{ba}(i);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t k0 = 0; k0 < S; k0 += kFlashKeyPass.outer) {
        flash_backward_key_block(tiles, ba, b, h, k0, smem.data());
        finish(tiles);
      }
      for (int64_t q0 = 0; q0 < S; q0 += kFlashQueryPass.outer) {
        flash_backward_query_block(tiles, ba, b, h, q0, smem.data());
        finish(tiles);
      }
    }
  return {t[3], t[5], t[6], t[7]};
}

// Every block of every pass under `tiles` gives what it gives under HostTiles, bit for bit.
template <typename Tiles>
void expect_blocks_as_under_host_tiles(const Tiles& tiles) {
  std::vector<float> lse, lse_other;
  const auto in_order = attention_blocks(HostTiles{}, lse);
  const auto other = attention_blocks(tiles, lse_other);
  EXPECT_EQ(lse_other, lse);
  const char* names[] = {"context", "dq", "dk", "dv"};
  for (size_t t = 0; t < in_order.size(); ++t) EXPECT_EQ(values(other[t]), values(in_order[t])) << names[t];
  EXPECT_GT(*std::max_element(lse.begin(), lse.end()), 0.0f);  // the blocks ran
}

TEST(CudaBodies, AttentionBlocksHaveNoRacesWithinAPhase) { expect_blocks_as_under_host_tiles(ReversedHostTiles{}); }

TEST(CudaBodies, AttentionBlocksSyncBetweenEveryPhaseThatReadsAnother) {
  expect_blocks_as_under_host_tiles(ThreadMajorTiles{});
}

// Every block's copies are waited for before a phase reads them.
TEST(CudaBodies, AttentionBlocksWaitForTheirCopies) { expect_blocks_as_under_host_tiles(LateCopyTiles{}); }

// The sm_90a kernels' products (the warpgroup's wgmma, B through descriptors of the tiles) give every
// block of every pass what the warps' m16n8k16 products give, bit for bit: the same sums in the
// same order, every B element where its descriptor says.
TEST(CudaBodies, AttentionBlocksUnderWarpgroupProductsAsUnderWarpProducts) {
  expect_blocks_as_under_host_tiles(HostWarpgroupTiles{});
}

// A head's rows loaded into a tile as 16-byte packs (aligned rows of whole packs) and element by
// element: the same tile bit for bit, the rows past the sequence zeros; into a wider tile, the
// columns past the head dim zeros.
TEST(CudaBodies, AttentionTileLoadsByPacksAsByElements) {
  const int64_t S = 37, heads = 3, d = 64, ld = 3 * heads * d;
  const FlashShape s{1, heads, S, d};
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> rows = stored<T>(random_normal(S * ld, 9));
    const int tile_rows = 64;
    for (int64_t first : {0, 32}) {
      std::vector<T> packed(size_t(tile_rows * d), store<T>(7.0f)), single = packed;
      const T zero = store<T>(0.0f);
      FlashHeads<const T> x{rows.data(), ld, S * ld, d, true};
      flash_load_rows(HostTiles{}, x, s, 0, 2, first, tile_rows, packed.data(), int(d));
      x.packs = false;
      flash_load_rows(HostTiles{}, x, s, 0, 2, first, tile_rows, single.data(), int(d));
      EXPECT_EQ(std::memcmp(packed.data(), single.data(), packed.size() * sizeof(T)), 0) << "first " << first;
      EXPECT_EQ(load(packed[size_t(core_offset(int(d), int(S - first), 0))]), 0.0f);  // the first row past the sequence
      const int wide = int(d) + 16;  // a head dim padded to the kernel's
      std::vector<T> padded(size_t(tile_rows * wide), store<T>(7.0f));
      flash_load_rows(HostTiles{}, x, s, 0, 2, first, tile_rows, padded.data(), wide);
      for (int r = 0; r < tile_rows; ++r)
        for (int c = 0; c < wide; ++c) {
          const T& want = c < d ? single[size_t(core_offset(int(d), r, c))] : zero;
          ASSERT_EQ(std::memcmp(&padded[size_t(core_offset(wide, r, c))], &want, sizeof(T)), 0)
              << "row " << r << " column " << c;
        }
    }
  });
}

// A tile's rows stored into a head as 16-byte packs and element by element: the same rows bit for
// bit, the tile's values, nothing written past the sequence.
TEST(CudaBodies, AttentionTileStoresByPacksAsByElements) {
  const int64_t S = 37, heads = 3, d = 64, ld = 3 * heads * d;
  const FlashShape s{1, heads, S, d};
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const int tile_rows = 64;
    const std::vector<T> tile = stored<T>(random_normal(tile_rows * d, 10));
    for (int64_t first : {0, 32}) {
      std::vector<T> packed(size_t(S * ld), store<T>(7.0f)), single = packed;
      FlashHeads<T> x{packed.data(), ld, S * ld, d, true};
      flash_store_rows(HostTiles{}, tile.data(), int(d), s, 0, 1, first, tile_rows, x);
      x = {single.data(), ld, S * ld, d, false};
      flash_store_rows(HostTiles{}, tile.data(), int(d), s, 0, 1, first, tile_rows, x);
      EXPECT_EQ(std::memcmp(packed.data(), single.data(), packed.size() * sizeof(T)), 0) << "first " << first;
      EXPECT_EQ(std::memcmp(&packed[size_t(first * ld + d)], &tile[0], sizeof(T)), 0);  // head 1's first element
      EXPECT_EQ(load(packed[size_t((S - 1) * ld + 2 * d)]), 7.0f);  // head 2: not written
    }
  });
}

// The backward's D = rowsum(dO o) of every row of heads read in place, as 16-byte packs and element
// by element, against float64.
TEST(CudaBodies, AttentionRowDotsByPacksAsByElements) {
  const int64_t B = 2, heads = 3, S = 5, d = 64, ld = 3 * heads * d;
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> dout = stored<T>(random_normal(B * S * ld, 12)), o = stored<T>(random_normal(B * S * ld, 13));
    const auto heads_of = [&](const std::vector<T>& v, bool packs) {
      return FlashHeads<const T>{v.data(), ld, S * ld, d, packs};
    };
    std::vector<float> packed(size_t(B * heads * S)), single(packed.size());
    std::vector<double> want(packed.size());
    for (bool packs : {true, false}) {
      FlashBackwardArgs<T> a;
      a.shape = FlashShape{B, heads, S, d};
      a.dout = heads_of(dout, packs), a.o = heads_of(o, packs);
      a.dot = packs ? packed.data() : single.data();
      for (int64_t i = 0; i < B * heads * S; ++i) FlashRowDotsBody<T>{a}(i);
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t c = 0; c < d; ++c) {
            const size_t e = size_t((b * S + i) * ld + h * d + c);
            want[size_t((b * heads + h) * S + i)] += double(load(dout[e])) * load(o[e]);
          }
    EXPECT_LT(max_rel_error(packed, want), 1e-5);
    EXPECT_LT(max_rel_error(single, want), 1e-5);
  });
}

}  // namespace
}  // namespace kiln
