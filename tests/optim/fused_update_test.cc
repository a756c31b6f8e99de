// The fused optimizer ops give bitwise the results of the per-parameter f32 loops they replaced
// (kept here as the reference), and refresh the weights' compute copy in the same pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "kiln/backend/cpu/adam_math.h"
#include "kiln/backend/cpu/typed.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/lamb.h"
#include "kiln/optim/lars.h"
#include "optim_test_util.h"
#include "tests/testing/thread_count.h"

namespace kiln::optim {
namespace {

using ops::cpu::adam_direction;
using ops::cpu::adam_moments;

// The old loops, element by element in f32, sums in double over 2^14-element chunks in order.
double chunked_sum(int64_t n, const std::function<double(int64_t)>& f) {
  double total = 0;
  for (int64_t c = 0; c * ops::kSumChunk < n; ++c) {
    double s = 0;
    for (int64_t i = c * ops::kSumChunk; i < std::min(n, (c + 1) * ops::kSumChunk); ++i) s += f(i);
    total += s;
  }
  return total;
}

struct OldState {
  std::vector<float> w, m, v;
};

void old_adamw(const ParamStore& store, OldState& s, const AdamWConfig& c, float lr, int t) {
  const float bc1 = adam_bias_correction(c.beta1, t), bc2 = adam_bias_correction(c.beta2, t);
  for (const ParamSpec& spec : store.specs()) {
    const float wd = spec.decay ? c.weight_decay : 0.0f;
    for (int64_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
      adam_moments(store.host_grads()[size_t(i)], c.beta1, c.beta2, s.m[i], s.v[i]);
      s.w[i] -= lr * adam_direction(s.m[i], s.v[i], s.w[i], bc1, bc2, c.eps, wd);
    }
  }
}

void old_lamb(const ParamStore& store, OldState& s, const LambConfig& c, float lr, int t) {
  const float bc1 = adam_bias_correction(c.beta1, t), bc2 = adam_bias_correction(c.beta2, t);
  for (const ParamSpec& spec : store.specs()) {
    const float wd = spec.decay ? c.weight_decay : 0.0f;
    float *w = s.w.data() + spec.offset, *m = s.m.data() + spec.offset, *v = s.v.data() + spec.offset;
    const float* g = store.host_grads().data() + spec.offset;
    auto update = [&](int64_t i) { return adam_direction(m[i], v[i], w[i], bc1, bc2, c.eps, wd); };
    const double wn = chunked_sum(spec.numel, [&](int64_t i) {
      adam_moments(g[i], c.beta1, c.beta2, m[i], v[i]);
      return double(w[i]) * double(w[i]);
    });
    const double un = chunked_sum(spec.numel, [&](int64_t i) { const float u = update(i); return double(u) * double(u); });
    const double ratio = wn > 0 && un > 0 ? std::sqrt(wn) / std::sqrt(un) : 1.0;
    const float scale = float(double(lr) * ratio);
    for (int64_t i = 0; i < spec.numel; ++i) w[i] -= scale * update(i);
  }
}

void old_lars(const ParamStore& store, OldState& s, const LarsConfig& c, float lr) {
  for (const ParamSpec& spec : store.specs()) {
    float *w = s.w.data() + spec.offset, *v = s.m.data() + spec.offset;
    const float* g = store.host_grads().data() + spec.offset;
    const float wd = spec.decay ? c.weight_decay : 0.0f;
    float scale = lr;
    if (spec.decay) {
      const double wn = std::sqrt(chunked_sum(spec.numel, [&](int64_t i) { return double(w[i]) * w[i]; }));
      const double gn = std::sqrt(chunked_sum(spec.numel, [&](int64_t i) { return double(g[i]) * g[i]; }));
      const double r = wn > 0 && gn > 0 ? double(c.eeta) * wn / (gn + double(wd) * wn + double(c.epsilon)) : 1.0;
      scale = float(double(lr) * r);
    }
    for (int64_t i = 0; i < spec.numel; ++i) {
      v[i] = c.momentum * v[i] + scale * (g[i] + wd * w[i]);
      w[i] -= v[i];
    }
  }
}

// Runs three steps of `opt` and of `old` on the same gradients; weights and state must agree
// bitwise, and the compute copy must be the cast of the weights.
template <typename Opt, typename Old>
void expect_bitwise(DType compute, Opt make, Old old) {
  ParamStore store;
  test::make_store(store, 9000);  // the weight spans several sum chunks
  store.set_compute_dtype(compute);
  auto opt = make(store);
  OldState s{store.values_vector(), std::vector<float>(size_t(store.size()), 0.0f),
             std::vector<float>(size_t(store.size()), 0.0f)};
  for (int t = 1; t <= 3; ++t) {
    test::fill_grads(store, t);
    opt->step(0.01f * float(t));
    old(store, s, 0.01f * float(t), t);
    ASSERT_EQ(store.values_vector(), s.w) << "step " << t;
    const std::vector<NamedState> state = opt->state();
    ASSERT_EQ(to_float_vector(*state[0].data), s.m) << state[0].name;
    if (state.size() > 1) {
      ASSERT_EQ(to_float_vector(*state[1].data), s.v) << state[1].name;
    }
    if (compute == DType::f32) {
      EXPECT_FALSE(store.compute.defined());
      continue;
    }
    for (const ParamSpec& spec : store.specs())
      for (int64_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
        const uint16_t bits = static_cast<const uint16_t*>(store.compute.data)[i];
        const uint16_t want = compute == DType::bf16 ? f32_to_bf16(s.w[size_t(i)]) : f32_to_f16(s.w[size_t(i)]);
        ASSERT_EQ(bits, want) << spec.name << "[" << i - spec.offset << "] step " << t;
      }
  }
}

TEST(FusedUpdate, AdamWIsBitwiseTheOldLoopAndRefreshesTheComputeCopy) {
  AdamWConfig c;
  c.weight_decay = 0.1f;
  for (DType compute : {DType::f32, DType::bf16, DType::f16})
    expect_bitwise(compute, [&](ParamStore& st) { return std::make_unique<AdamW>(st, c); },
                   [&](ParamStore& st, OldState& s, float lr, int t) { old_adamw(st, s, c, lr, t); });
}

TEST(FusedUpdate, LambIsBitwiseTheOldLoopAndRefreshesTheComputeCopy) {
  LambConfig c;
  c.weight_decay = 0.1f;
  for (DType compute : {DType::f32, DType::bf16, DType::f16})
    expect_bitwise(compute, [&](ParamStore& st) { return std::make_unique<Lamb>(st, c); },
                   [&](ParamStore& st, OldState& s, float lr, int t) { old_lamb(st, s, c, lr, t); });
}

TEST(FusedUpdate, LarsIsBitwiseTheOldLoopAndRefreshesTheComputeCopy) {
  LarsConfig c;
  for (DType compute : {DType::f32, DType::bf16, DType::f16})
    expect_bitwise(compute, [&](ParamStore& st) { return std::make_unique<Lars>(st, c); },
                   [&](ParamStore& st, OldState& s, float lr, int) { old_lars(st, s, c, lr); });
}

// Weights and every state buffer (backend.h: the multi-tensor ops do not depend on the thread count).
TEST(FusedUpdate, LambLarsAndAdamWAreBitwiseIdenticalAtOneAndTwoThreads) {
  enum Kind { lamb, lars, adamw };
  auto run = [](Kind kind) {
    ParamStore store;
    test::make_store(store, 20000);
    std::unique_ptr<Optimizer> opt;
    if (kind == lamb) opt = std::make_unique<Lamb>(store);
    else if (kind == lars) opt = std::make_unique<Lars>(store);
    else opt = std::make_unique<AdamW>(store);
    for (int t = 1; t <= 2; ++t) {
      test::fill_grads(store, t);
      opt->step(0.05f);
    }
    std::vector<float> out = store.values_vector();
    for (const NamedState& s : opt->state()) {
      const std::vector<float> v = to_float_vector(*s.data);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  for (Kind kind : {lamb, lars, adamw})
    kiln::testing::expect_thread_count_independent("optimizer " + std::to_string(int(kind)), [&] { return run(kind); });
}

}  // namespace
}  // namespace kiln::optim
