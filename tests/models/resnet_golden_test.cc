// Golden parity of ResNet (train-mode forward, label-smoothed loss, all gradients, BN running
// statistics, two LARS steps) with torchvision in float64: tools/golden/make_resnet_golden.py
// -> tests/golden/resnet_tiny.safetensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "../backend/random_fill.h"
#include "kiln/io/safetensors.h"
#include "kiln/models/resnet.h"
#include "kiln/nn/cross_entropy.h"
#include "kiln/optim/lars.h"

namespace kiln::models {
namespace {

using kiln::testing::max_rel_error;

std::vector<float> values(const io::SafetensorsFile& f, const std::string& name) {
  const Tensor t = f.get(name);
  return std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel());
}

// Every parameter of the store, compared with `prefix + name`; returns the worst error.
double compare_params(const io::SafetensorsFile& f, const ParamStore& store, bool grads,
                      const std::string& prefix, std::string* worst) {
  double max_err = 0;
  for (const ParamSpec& s : store.specs()) {
    const auto want = values(f, prefix + s.name);
    const float* got = (grads ? store.host_grads() : store.host_values()).data() + s.offset;
    EXPECT_EQ(f.get(prefix + s.name).shape, s.shape) << s.name;
    const double err = max_rel_error(got, want);
    if (err > max_err) {
      max_err = err;
      *worst = prefix + s.name;
    }
  }
  return max_err;
}

TEST(ResNetGolden, MatchesTorchvisionForwardGradientsRunningStatsAndLars) {
  const auto f = io::SafetensorsFile::open(std::filesystem::path(KILN_SOURCE_DIR) /
                                           "tests/golden/resnet_tiny.safetensors");
  auto meta = [&](const char* key) { return f.metadata().at(key); };
  ResNetConfig config;
  config.depths = {1, 1, 1, 1};
  config.widths.clear();
  for (const char* p = meta("widths").c_str(); *p;) {
    char* end;
    config.widths.push_back(std::strtoll(p, &end, 10));
    p = *end ? end + 1 : end;
  }
  config.stem_width = std::stoll(meta("stem_width"));
  config.num_classes = std::stoll(meta("classes"));
  ParamStore store;
  ResNet model(config, store);

  int64_t in_file = 0;
  for (const auto& n : f.names()) in_file += n.rfind("grad.", 0) == 0;
  ASSERT_EQ(in_file, int64_t(store.specs().size()));
  for (const ParamSpec& s : store.specs()) {
    ASSERT_TRUE(f.contains(s.name)) << s.name;
    ASSERT_EQ(f.get(s.name).shape, s.shape) << s.name;
    std::memcpy(store.host_values().data() + s.offset, f.get(s.name).ptr<float>(), 4 * s.numel);
  }
  const auto buffers = model.buffers();
  ASSERT_EQ(buffers.size(), 3 * (1 + 4 * 4));  // stem BN + 3 BNs and a downsample BN per block
  for (auto& [name, buf] : buffers) {
    ASSERT_TRUE(f.contains("after." + name)) << name;
    if (name.ends_with("num_batches_tracked")) continue;
    const std::vector<float> v = values(f, name);
    std::copy(v.begin(), v.end(), buf->ptr<float>());
  }

  const Tensor images = f.get("images");  // (N, H, W, 3)
  const auto labels = f.get("labels");
  const int64_t N = images.dim(0);
  Step step;
  step.training = true;
  const Tensor logits = model.forward(step, images.ptr<float>(), N, images.dim(1), images.dim(2));
  EXPECT_LT(max_rel_error(logits.ptr<float>(), values(f, "logits")), 2e-5);

  nn::SoftmaxCrossEntropy xent(std::stof(meta("label_smoothing")));
  const auto loss = xent.forward(logits, labels.ptr<int32_t>());
  EXPECT_NEAR(loss.loss, f.get("loss").ptr<float>()[0], 1e-5);
  EXPECT_EQ(loss.count, 3);  // one padding row
  store.zero_grad();
  model.backward(step, xent.backward(1.0f));
  std::string worst;
  EXPECT_LT(compare_params(f, store, true, "grad.", &worst), 1e-4) << worst;

  for (auto& [name, buf] : buffers)
    EXPECT_LT(max_rel_error(to_float_vector(*buf), values(f, "after." + name)), 1e-5) << name;

  const std::vector<float> initial = store.values_vector();
  optim::LarsConfig lc;
  lc.momentum = std::stof(meta("lars_momentum"));
  lc.weight_decay = std::stof(meta("lars_weight_decay"));
  lc.eeta = std::stof(meta("lars_eeta"));
  lc.epsilon = std::stof(meta("lars_epsilon"));
  optim::Lars lars(store, lc);
  lars.step(std::stof(meta("lr0")));
  const Tensor logits2 = model.forward(step, images.ptr<float>(), N, images.dim(1), images.dim(2));
  const auto loss2 = xent.forward(logits2, labels.ptr<int32_t>());
  EXPECT_NEAR(loss2.loss, f.get("loss2").ptr<float>()[0], 1e-4);
  store.zero_grad();
  model.backward(step, xent.backward(1.0f));
  lars.step(std::stof(meta("lr1")));
  EXPECT_LT(compare_params(f, store, false, "lars2.", &worst), 1e-3) << worst;
  // The updates themselves: most are ~1e-3 of the weights, so compare w - w0 separately.
  for (const ParamSpec& s : store.specs()) {
    const auto want = values(f, "lars2." + s.name), w0 = values(f, s.name);
    std::vector<double> want_delta(want.size()), got_delta(want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      want_delta[i] = double(want[i]) - w0[i];
      got_delta[i] = double(store.host_values()[s.offset + i]) - initial[s.offset + i];
    }
    EXPECT_LT(max_rel_error(got_delta, want_delta), 5e-3) << s.name;  // measured <= 6e-4
  }
}

}  // namespace
}  // namespace kiln::models
