// Split master weights (backend.h: split_master / join_master; nn/params.h): the halves give the
// f32 weights back bit for bit, the high half is the weight rounded to bf16, and every optimizer
// update over split weights gives the f32 update's results bit for bit.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "parity.h"
#include "segments.h"

namespace kiln {
namespace {

using testing::Parity;

void skip_on_cuda(const Parity& p) {
  if (p.ctx.device.kind == DeviceKind::cuda) GTEST_SKIP() << "split master weights are the CPU backend's";
}

template <typename T>
std::vector<T> read_raw(Parity& p, const Tensor& t) {
  std::vector<T> host(size_t(t.numel()));
  Tensor view = Tensor::view(host.data(), t.shape, t.dtype);
  ops::copy(p.ctx, t, view);
  return host;
}

Tensor raw_on_device(Parity& p, const void* data, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype, p.ctx.device);
  ops::copy(p.ctx, Tensor::view(const_cast<void*>(data), shape, dtype), t);
  return t;
}

// The split of w into (high, low) on the device under test.
struct Halves {
  Tensor high, low;
};
Halves split(Parity& p, const Tensor& w) {
  Halves h{Tensor::empty(w.shape, DType::bf16, p.ctx.device), Tensor::empty(w.shape, DType::u16, p.ctx.device)};
  ops::split_master(p.ctx, w, h.high, h.low);
  return h;
}

std::vector<uint32_t> joined_bits(Parity& p, const Halves& h) {
  Tensor w = Tensor::empty(h.high.shape, DType::f32, p.ctx.device);
  ops::join_master(p.ctx, h.high, h.low, w);
  return read_raw<uint32_t>(p, w);
}

TEST(ParitySplitMaster, HalvesJoinBackBitForBitAndTheHighHalfIsTheWeightInBf16) {
  Parity p;
  skip_on_cuda(p);
  // Random bit patterns (every exponent, NaN and infinity among them), then the edge cases.
  std::vector<uint32_t> bits(1 << 16);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (uint32_t& b : bits) b = uint32_t((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 32);
  for (uint32_t edge : {0x00000000u, 0x80000000u, 0x00000001u, 0x00008000u, 0x00018000u, 0x3f808000u, 0x3f818000u,
                        0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7fffffffu, 0xffffffffu,
                        0x7f7f8000u, 0x3f7fffffu, 0xbf7f8000u})
    bits.push_back(edge);
  const Shape shape{int64_t(bits.size())};
  const Tensor w = raw_on_device(p, bits.data(), shape, DType::f32);
  const Halves h = split(p, w);
  const std::vector<uint32_t> back = joined_bits(p, h);
  const std::vector<uint16_t> high = read_raw<uint16_t>(p, h.high);
  int64_t ties = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    const float x = f32_from_bits(bits[i]);
    if (std::isnan(x)) {  // NaN stays NaN in both halves' views, payload aside
      ASSERT_TRUE(std::isnan(f32_from_bits(back[i]))) << std::hex << bits[i];
      ASSERT_TRUE(std::isnan(bf16_to_f32(high[i]))) << std::hex << bits[i];
      continue;
    }
    ASSERT_EQ(back[i], bits[i]) << "element " << i;
    // Round to nearest: the high half is bf16's rounding of x, ties away from zero where
    // round-to-nearest-even would go the other way.
    const bool tie = (bits[i] & 0xffffu) == 0x8000u;
    ties += tie;
    const uint16_t want = tie ? uint16_t((bits[i] >> 16) + 1) : f32_to_bf16(x);
    ASSERT_EQ(high[i], want) << std::hex << bits[i];
  }
  EXPECT_GE(ties, 5);  // the edge cases' ties were checked
}

// One optimizer case: the same weights as f32 with a bf16 copy, and split.
struct SplitCase {
  int64_t n = 0;
  std::vector<ops::TensorSegment> segs;
  Tensor W, C, G, M, V;   // f32 master and its bf16 copy; gradients; state (the f32 run's)
  Tensor M2, V2;          // the split run's state
  Halves h;
};

SplitCase make_case(Parity& p, uint32_t id) {
  SplitCase c;
  c.segs = testing::spaced_segments({1, 37, 3 * ops::kSumChunk + 11, 256, 1000}, c.n);
  const Tensor w0 = p.random({c.n}, DType::f32, id, 0.5f);
  c.h = split(p, w0);
  // The f32 run starts from the joined weights and the split's own copy, as a split run does.
  c.W = Tensor::empty({c.n}, DType::f32, p.ctx.device);
  ops::join_master(p.ctx, c.h.high, c.h.low, c.W);
  c.C = Tensor::empty({c.n}, DType::bf16, p.ctx.device);
  ops::copy(p.ctx, c.h.high, c.C);
  c.G = p.random({c.n}, DType::f32, id + 1, 0.1f);
  c.M = p.random({c.n}, DType::f32, id + 2, 0.01f);
  std::vector<float> vh = testing::random_normal(c.n, id + 3, 1e-3f);
  for (float& x : vh) x = x * x;
  c.V = p.from_host(vh, {c.n}, DType::f32);
  c.M2 = Tensor::empty({c.n}, DType::f32, p.ctx.device);
  c.V2 = Tensor::empty({c.n}, DType::f32, p.ctx.device);
  ops::copy(p.ctx, c.M, c.M2);
  ops::copy(p.ctx, c.V, c.V2);
  return c;
}

// After the same update: the split weights join to the f32 run's weights, their high half is
// those weights rounded as split_master rounds them, and the state is the same.
void expect_same_update(Parity& p, const SplitCase& c, const char* what) {
  EXPECT_EQ(joined_bits(p, c.h), read_raw<uint32_t>(p, c.W)) << what;
  const Halves again = split(p, c.W);
  EXPECT_EQ(read_raw<uint16_t>(p, c.h.high), read_raw<uint16_t>(p, again.high)) << what;
  EXPECT_EQ(read_raw<uint32_t>(p, c.M2), read_raw<uint32_t>(p, c.M)) << what;
  EXPECT_EQ(read_raw<uint32_t>(p, c.V2), read_raw<uint32_t>(p, c.V)) << what;
}

Tensor step_block(Parity& p, double lr) {
  std::vector<double> host(ops::kStepScalars, 0.0);
  host[ops::kStepGradFactor] = double(0.37f);
  host[ops::kStepLr] = lr;
  host[ops::kStepBc1] = double(0.271f);
  host[ops::kStepBc2] = double(0.00299f);
  return raw_on_device(p, host.data(), {ops::kStepScalars}, DType::i64);
}

TEST(ParitySplitMaster, AdamWLambAndLarsUpdateSplitWeightsAsF32Ones) {
  Parity p;
  skip_on_cuda(p);
  const ops::AdamStep adam{0.9f, 0.999f, 1e-6f, 0.1f};
  const ops::LarsStep lars{0.9f, 1e-4f, 0.001f, 1e-9f};
  for (const char* opt : {"adamw", "lamb", "lars"}) {
    SplitCase c = make_case(p, 40);
    const Tensor block = step_block(p, 0.01);
    const int64_t k = int64_t(c.segs.size());
    Tensor n1 = Tensor::empty({k, 2}, DType::i64, p.ctx.device), n2 = Tensor::empty({k, 2}, DType::i64, p.ctx.device);
    const std::string name = opt;
    for (int step = 0; step < 3; ++step) {
      if (name == "adamw") {
        ops::adamw_update(p.ctx, adam, block, c.segs, c.W, c.G, c.M, c.V, c.C);
        ops::adamw_update(p.ctx, adam, block, c.segs, c.h.low, c.G, c.M2, c.V2, c.h.high);
      } else if (name == "lamb") {
        ops::lamb_moments(p.ctx, adam, block, c.segs, c.W, Tensor{}, c.G, c.M, c.V, n1);
        ops::lamb_moments(p.ctx, adam, block, c.segs, c.h.low, c.h.high, c.G, c.M2, c.V2, n2);
        EXPECT_EQ(read_raw<uint64_t>(p, n1), read_raw<uint64_t>(p, n2)) << "lamb norms, step " << step;
        ops::lamb_update(p.ctx, adam, block, c.segs, n1, c.W, c.M, c.V, c.C);
        ops::lamb_update(p.ctx, adam, block, c.segs, n2, c.h.low, c.M2, c.V2, c.h.high);
      } else {
        ops::segment_sum_squares(p.ctx, c.W, c.G, c.segs, n1);
        ops::segment_sum_squares(p.ctx, c.h.low, c.G, c.segs, n2, c.h.high);
        EXPECT_EQ(read_raw<uint64_t>(p, n1), read_raw<uint64_t>(p, n2)) << "lars norms, step " << step;
        ops::lars_update(p.ctx, lars, block, c.segs, n1, c.W, c.G, c.M, c.C);
        ops::lars_update(p.ctx, lars, block, c.segs, n2, c.h.low, c.G, c.M2, c.h.high);
      }
    }
    expect_same_update(p, c, opt);
  }
}

TEST(ParitySplitMaster, SplitWeightsNeedTheirHighHalves) {
  Parity p;
  skip_on_cuda(p);
  SplitCase c = make_case(p, 50);
  const Tensor block = step_block(p, 0.01);
  Tensor none;
  EXPECT_THROW(ops::adamw_update(p.ctx, {}, block, c.segs, c.h.low, c.G, c.M2, c.V2, none), Error);
  Tensor f16 = Tensor::empty({c.n}, DType::f16, p.ctx.device);
  EXPECT_THROW(ops::adamw_update(p.ctx, {}, block, c.segs, c.h.low, c.G, c.M2, c.V2, f16), Error);
}

}  // namespace
}  // namespace kiln
