// bench/resnet_step.cc — one ResNet training step through the model alone (forward,
// label-smoothed cross-entropy, backward, and the compute-copy refresh an optimizer step does),
// in f32 and in bf16 activations/weights, median over the timed steps. What `kiln train resnet
// --benchmark` measures minus the data pipeline and the optimizer, per compute dtype.
// Usage: resnet_step [batch=16] [size=224] [steps=3] [dtypes=f32,bf16] (one warm-up step each)
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/core/philox.h"
#include "kiln/core/timer.h"
#include "kiln/models/resnet.h"
#include "kiln/nn/cross_entropy.h"

int main(int argc, char** argv) {
  using namespace kiln;
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 16;
  const int64_t size = argc > 2 ? std::atoll(argv[2]) : 224;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 3;
  const std::string dtypes = fmt::format(",{},", argc > 4 ? argv[4] : "f32,bf16");
  std::vector<float> images(static_cast<size_t>(batch * size * size * 3));
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  const RngStream rng{1, rng_stream(RngPurpose::test, 0, 0)};
  for (size_t i = 0; i < images.size(); ++i) images[i] = rng.normal(i);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(i * 37 % 1000);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    if (dtypes.find(fmt::format(",{},", dtype_name(dtype))) == std::string::npos) continue;
    ParamStore store;
    models::ResNet model(models::ResNetConfig::resnet50(), store);
    store.set_compute_dtype(dtype);
    nn::SoftmaxCrossEntropy xent(0.1f);
    Step step;
    step.compute_dtype = dtype;
    std::vector<double> seconds;
    for (int s = 0; s < steps + 1; ++s) {
      Timer timer;
      store.zero_grad();
      const Tensor logits = model.forward(step, images.data(), batch, size, size);
      xent.forward(logits, labels.data());
      model.backward(step, xent.backward(1.0f));
      store.refresh_compute();
      if (s >= 1) seconds.push_back(timer.seconds());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    const double flops = 3.0 * double(model.flops_per_image(size, size)) * double(batch);
    fmt::print("resnet50 b{} {}px {}: median {:.1f} ms/step, {:.1f} img/s, {:.1f} GFLOP/s (conv "
               "native {})\n",
               batch, size, dtype_name(dtype), median * 1e3, double(batch) / median,
               flops / median / 1e9, ops::conv2d_native(dtype));
    std::fflush(stdout);
  }
}
