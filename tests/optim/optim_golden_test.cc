// LAMB, AdamW and LARS against tools/golden/make_optim_golden.py (numpy float64 from the published
// rules) -> tests/golden/optim_steps.safetensors: every step's parameters, the step's update
// itself and the optimizer state, fed the golden's gradients and learning rates.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../backend/random_fill.h"
#include "kiln/io/safetensors.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/lamb.h"
#include "kiln/optim/lars.h"

namespace kiln::optim {
namespace {

using kiln::testing::max_rel_error;

// Stated tolerances (relative to the tensor's largest element). Measured: values <= 2e-7,
// updates w_t - w_(t-1) <= 3.2e-5 (the f32 rounding of w against an update ~1e-3 of it),
// state <= 1.1e-7.
constexpr double kValueTol = 1e-6, kUpdateTol = 3e-4, kStateTol = 1e-6;

io::SafetensorsFile golden() {
  return io::SafetensorsFile::open(std::filesystem::path(KILN_SOURCE_DIR) / "tests/golden/optim_steps.safetensors");
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<float> values(const io::SafetensorsFile& f, const std::string& name) {
  const Tensor t = f.get(name);
  return std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel());
}

// The golden's parameters ("name:decay" in metadata order) with their initial values.
void make_store(const io::SafetensorsFile& f, ParamStore& store) {
  for (const std::string& item : split(f.metadata().at("params"))) {
    const std::string name = item.substr(0, item.find(':'));
    store.add(name, f.get("init." + name).shape, item.ends_with(":1"));
  }
  store.allocate();
  for (const ParamSpec& s : store.specs()) {
    const auto v = values(f, "init." + s.name);
    std::copy(v.begin(), v.end(), store.host_values().begin() + s.offset);
  }
}

std::vector<float> slice(const float* flat, const ParamSpec& s) { return {flat + s.offset, flat + s.offset + s.numel}; }

// Runs the golden's steps for optimizer `opt` ("lamb", "adamw", "lars"), built by `make`,
// comparing after every step.
void expect_matches_every_step(const std::string& opt,
                               const std::function<std::unique_ptr<Optimizer>(ParamStore&)>& make) {
  const auto f = golden();
  ParamStore store;
  make_store(f, store);
  std::unique_ptr<Optimizer> optimizer = make(store);
  const std::vector<std::string> lrs = split(f.metadata().at(opt + "_lr"));
  const int steps = std::stoi(f.metadata().at("steps"));
  ASSERT_EQ(int(lrs.size()), steps);
  std::vector<float> before = store.values_vector();
  for (int t = 1; t <= steps; ++t) {
    const std::string step = std::to_string(t);
    for (const ParamSpec& s : store.specs()) {
      const auto g = values(f, "grad." + step + "." + s.name);
      std::copy(g.begin(), g.end(), store.host_grads().begin() + s.offset);
    }
    optimizer->step(std::stof(lrs[size_t(t - 1)]));
    for (const ParamSpec& s : store.specs()) {
      const std::string at = opt + "." + step + ".";
      const auto want = values(f, at + s.name);
      const auto got = slice(store.host_values().data(), s);
      EXPECT_LT(max_rel_error(got, want), kValueTol) << at << s.name;
      const std::string previous = t == 1 ? "init." : opt + "." + std::to_string(t - 1) + ".";
      const auto want_before = values(f, previous + s.name);
      std::vector<double> got_update(got.size()), want_update(got.size());
      for (size_t i = 0; i < got.size(); ++i) {
        got_update[i] = double(got[i]) - before[size_t(s.offset) + i];
        want_update[i] = double(want[i]) - want_before[i];
      }
      EXPECT_LT(max_rel_error(got_update, want_update), kUpdateTol) << at << s.name << " update";
      for (const NamedState& state : optimizer->state()) {
        const std::string key = at + state.name + "." + s.name;
        ASSERT_TRUE(f.contains(key)) << key;
        EXPECT_LT(max_rel_error(slice(state.data->ptr<float>(), s), values(f, key)), kStateTol) << key;
      }
    }
    before = store.values_vector();
  }
  EXPECT_EQ(optimizer->steps_taken(), steps);
}

float meta(const io::SafetensorsFile& f, const std::string& key) { return std::stof(f.metadata().at(key)); }

TEST(OptimGolden, LambMatchesTheReferenceAtEveryStep) {
  const auto f = golden();
  LambConfig c;
  c.beta1 = meta(f, "lamb_beta1");
  c.beta2 = meta(f, "lamb_beta2");
  c.eps = meta(f, "lamb_eps");
  c.weight_decay = meta(f, "lamb_weight_decay");
  expect_matches_every_step("lamb", [&](ParamStore& s) { return std::make_unique<Lamb>(s, c); });
}

TEST(OptimGolden, AdamWMatchesTheReferenceAtEveryStep) {
  const auto f = golden();
  AdamWConfig c;
  c.beta1 = meta(f, "adamw_beta1");
  c.beta2 = meta(f, "adamw_beta2");
  c.eps = meta(f, "adamw_eps");
  c.weight_decay = meta(f, "adamw_weight_decay");
  expect_matches_every_step("adamw", [&](ParamStore& s) { return std::make_unique<AdamW>(s, c); });
}

TEST(OptimGolden, LarsMatchesTheReferenceAtEveryStep) {
  const auto f = golden();
  LarsConfig c;
  c.momentum = meta(f, "lars_momentum");
  c.weight_decay = meta(f, "lars_weight_decay");
  c.eeta = meta(f, "lars_eeta");
  c.epsilon = meta(f, "lars_epsilon");
  expect_matches_every_step("lars", [&](ParamStore& s) { return std::make_unique<Lars>(s, c); });
}

}  // namespace
}  // namespace kiln::optim
