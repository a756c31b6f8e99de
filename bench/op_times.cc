// bench/op_times.cc — median times of the ops of a BERT-base step (B 8, S 128, bf16 activations,
// f32 master state) one at a time, so that a change to one op is measured without the noise of a
// whole step, with the heads' products and some f32 products on both oneDNN primitives; `conv`:
// ResNet-50's 1x1 convolutions against their products over pixels; `wgrad`: ResNet-50's 3x3
// weight gradients as the CPU backend takes them; `wgrad1x1` and `dgrad`: ResNet-50's 1x1 weight
// gradients and stride-1 3x3 input gradients beside oneDNN paths the backend does not take;
// `bn`: batch norm's passes from cold caches, in GB/s; `resnet`: ResNet-50's elementwise passes,
// batch norm (beside oneDNN's, the peer) and max pool; `attention`: BERT-large's attention
// probabilities, op by op and fused. Operands stay in cache between runs where they fit, unlike in
// the step (but for `bn`).
// Usage: op_times [threads [conv|wgrad|wgrad1x1|dgrad|bn|resnet|attention]]
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/cpu/matmul.h"
#include "kiln/backend/cpu/matmul_primitive.h"
#include "kiln/core/philox.h"
#include "kiln/core/timer.h"

namespace {

using namespace kiln;

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor f = Tensor::empty(shape);
  const RngStream rng{seed, rng_stream(RngPurpose::test, 0, 0)};
  for (int64_t i = 0; i < f.numel(); ++i) f.ptr<float>()[i] = rng.uniform(i) - 0.5f;  // host-side setup
  if (dtype == DType::f32) return f;
  Tensor t = Tensor::empty(shape, dtype);
  ops::cast(cpu_context(), f, t);
  return t;
}

// The ops' scratch, as in the training step: reset after each run, so an op's working memory is
// reused rather than allocated and faulted in again on every call.
Arena scratch_arena;

// The median and the fastest of 10 timed runs (after 3 warm-ups), in ms; `before` runs, untimed,
// ahead of each.
std::pair<double, double> median_and_min_ms(const std::function<void()>& op,
                                            const std::function<void()>& before = {}) {
  std::vector<double> ms;
  for (int run = 0; run < 13; ++run) {
    if (before) before();
    Timer timer;
    op();
    if (run >= 3) ms.push_back(timer.seconds() * 1e3);
    scratch_arena.reset();
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

// Prints the median of 10 timed runs (after 3 warm-ups), and GFLOP/s where gflop is given.
void time_op(const std::string& name, const std::function<void()>& op, double gflop = 0.0) {
  const auto [median, fastest] = median_and_min_ms(op);
  fmt::print("{:<44} {:8.3f} ms (min {:.3f})", name, median, fastest);
  if (gflop > 0) fmt::print(", {:.0f} GFLOP/s", gflop / median * 1e3);
  fmt::print("\n");
}

// The same with the caches emptied before each run (256 MB written), and the GB/s of `mbytes`.
void time_cold(const std::string& name, const std::function<void()>& op, double mbytes) {
  static std::vector<float> flush(size_t(64) << 20);
  const auto [median, fastest] = median_and_min_ms(op, [] {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < flush.size(); ++i) flush[i] += 1.0f;
  });
  fmt::print("{:<44} {:8.3f} ms (min {:.3f}), {:.1f} GB/s\n", name, median, fastest, mbytes / median);
}

constexpr int64_t kRows = 8 * 128, kHidden = 768, kFfn = 3072, kVocab = 30522, kParams = 110'106'428;

void time_rows(Context& ctx) {
  Tensor x = random_tensor({kRows, kHidden}, DType::bf16, 1), dy = random_tensor({kRows, kHidden}, DType::bf16, 2);
  Tensor w = random_tensor({kHidden}, DType::f32, 3), b = random_tensor({kHidden}, DType::f32, 4);
  Tensor y = Tensor::empty({kRows, kHidden}, DType::bf16), dx = Tensor::empty({kRows, kHidden}, DType::bf16);
  Tensor mean = Tensor::empty({kRows}), rstd = Tensor::empty({kRows});
  Tensor dw = Tensor::empty({kHidden}), db = Tensor::empty({kHidden});
  time_op("layernorm_forward (1024, 768)", [&] { ops::layernorm_forward(ctx, x, w, b, 1e-12f, y, mean, rstd); });
  time_op("layernorm_backward (1024, 768)", [&] { ops::layernorm_backward(ctx, dy, x, w, mean, rstd, dx, dw, db); });
  Tensor h = random_tensor({kRows, kFfn}, DType::bf16, 5), dh = random_tensor({kRows, kFfn}, DType::bf16, 6);
  Tensor g = Tensor::empty({kRows, kFfn}, DType::bf16), dg = Tensor::empty({kRows, kFfn}, DType::bf16);
  time_op("gelu_forward (1024, 3072)", [&] { ops::gelu_forward(ctx, ops::GeluKind::erf, h, g); });
  time_op("gelu_backward (1024, 3072)", [&] { ops::gelu_backward(ctx, ops::GeluKind::erf, h, dh, dg); });
}

// A linear layer's forward, weight-gradient and input-gradient products over `rows` rows.
void time_linear(Context& ctx, int64_t in, int64_t out, int64_t rows = kRows, DType dtype = DType::bf16) {
  Tensor x = random_tensor({rows, in}, dtype, 8), w = random_tensor({out, in}, dtype, 9);
  Tensor y = random_tensor({rows, out}, dtype, 10), dw = random_tensor({out, in}, DType::f32, 11);
  const double gflop = 2e-9 * double(rows * in * out);
  // Each product also on oneDNN's matmul primitive, which the inner-product primitives replace.
  const auto run = [&](const char* what, const ops::MatView& a, const ops::MatView& b, const ops::MatView& c,
                       ops::MatmulOpts o) {
    for (const bool matmul_primitive : {false, true}) {
      ops::cpu::force_matmul_primitive(matmul_primitive);
      time_op(fmt::format("matmul {} {}x{}x{} {}{}", what, rows, in, out, dtype_name(dtype),
                          matmul_primitive ? " (matmul prim.)" : ""),
              [&] { ops::matmul(ctx, a, b, c, o); }, gflop);
    }
    ops::cpu::force_matmul_primitive(false);
  };
  const Tensor bias = random_tensor({out}, dtype, 16);
  run("y = x W' + b", ops::mat(x), ops::mat(w, true), ops::mat(y), {.bias = &bias});
  run("dW = dy' x", ops::mat(y, true), ops::mat(x), ops::mat(dw), {});  // a step's first contribution
  run("dx = dy W", ops::mat(y), ops::mat(w), ops::mat(x), {});
  time_op(fmt::format("matmul dW += dy' x {}x{}x{}", rows, in, out),
          [&] { ops::matmul(ctx, ops::mat(y, true), ops::mat(x), ops::mat(dw), {.beta = 1.0f}); }, gflop);
}

// Attention's batched products over {8, 12} heads of (128, 64), and its softmax.
void time_attention(Context& ctx) {
  Tensor q = random_tensor({kRows, kHidden}, DType::bf16, 12), k = random_tensor({kRows, kHidden}, DType::bf16, 13);
  Tensor probs = random_tensor({8, 12, 128, 128}, DType::bf16, 14);
  Tensor scores = random_tensor({8, 12, 128, 128}, DType::bf16, 15);
  const double gflop = 2e-9 * 96 * 128 * 128 * 64;
  time_op("matmul scores = q k'", [&] {
    ops::matmul(ctx, ops::heads_view(q, 8, 128, 12), ops::heads_view(k, 8, 128, 12, true), ops::per_head(scores));
  }, gflop);
  time_op("matmul context = p v", [&] {
    ops::matmul(ctx, ops::per_head(probs), ops::heads_view(k, 8, 128, 12), ops::heads_view(q, 8, 128, 12));
  }, gflop);
  time_op("matmul dv = p' dcontext", [&] {
    ops::matmul(ctx, ops::per_head(probs, true), ops::heads_view(k, 8, 128, 12), ops::heads_view(q, 8, 128, 12));
  }, gflop);
  Tensor mask = Tensor::empty({8, 128}, DType::i32);
  for (int64_t i = 0; i < mask.numel(); ++i) mask.ptr<int32_t>()[i] = i % 128 < 100;  // host-side setup
  time_op("attention_softmax_forward (8, 12, 128, 128)", [&] { ops::attention_softmax_forward(ctx, scores, mask, probs); });
  time_op("softmax_backward (8, 12, 128, 128)", [&] { ops::softmax_backward(ctx, probs, scores, 0.125f, scores); });
}

// ResNet-50's 1x1 stride-1 convolutions: input channels, output channels, size.
constexpr int64_t kResNet1x1[][3] = {{64, 64, 56},    {64, 256, 56},   {256, 64, 56},  {256, 128, 56},
                                     {128, 512, 28},  {512, 128, 28},  {512, 256, 28}, {256, 1024, 14},
                                     {1024, 256, 14}, {1024, 512, 14}, {512, 2048, 7}, {2048, 512, 7}};

// ResNet-50's 1x1 stride-1 convolutions (batch 16, bf16), each as oneDNN's convolution and as the
// product over pixels it is: y (NHW, K) = x (NHW, C) w', dx (NHW, C) = dy (NHW, K) w.
void time_pixel_products(Context& ctx) {
  for (const auto& [C, K, H] : kResNet1x1) {
    ops::ConvShape s;
    s.N = 16, s.H = s.W = H, s.C = C, s.K = K;
    const int64_t pixels = s.N * H * H;
    Tensor x = random_tensor({s.N, H, H, C}, DType::bf16, 20), w = random_tensor({K, C, 1, 1}, DType::bf16, 21);
    Tensor y = random_tensor({s.N, H, H, K}, DType::bf16, 22);
    const ops::MatView x2 = ops::mat(x.reshape({pixels, C})), y2 = ops::mat(y.reshape({pixels, K}));
    const Tensor w2 = w.reshape({K, C});
    const double gflop = 2e-9 * double(pixels * C * K);
    const std::string name = fmt::format("{}->{} {}x{}", C, K, H, H);
    time_op("conv fwd " + name, [&] { ops::conv2d_forward(ctx, s, x, w, y); }, gflop);
    time_op("product fwd " + name, [&] { ops::matmul(ctx, x2, ops::mat(w2, true), y2); }, gflop);
    time_op("conv bwd-data " + name, [&] { ops::conv2d_backward_data(ctx, s, y, w, x); }, gflop);
    time_op("product bwd-data " + name, [&] { ops::matmul(ctx, y2, ops::mat(w2), x2); }, gflop);
  }
}

// ResNet-50's 3x3 weight gradients (batch 16) as the CPU backend takes them: windows gathered
// into a product where strided (and in bf16 onto 7x7), oneDNN's convolution kernel elsewhere.
void time_window_products(Context& ctx) {
  const int64_t shapes[][3] = {{64, 56, 1},  {128, 56, 2}, {128, 28, 1}, {256, 28, 2},
                               {256, 14, 1}, {512, 14, 2}, {512, 7, 1}};  // channels, input size, stride
  for (const DType dtype : {DType::bf16, DType::f32})
    for (const auto& [C, H, stride] : shapes) {
      ops::ConvShape s;
      s.N = 16, s.H = s.W = H, s.C = s.K = C, s.R = s.S = 3, s.pad_h = s.pad_w = 1;
      s.stride_h = s.stride_w = stride;
      Tensor x = random_tensor({s.N, H, H, C}, dtype, 23), dy = random_tensor({s.N, s.P(), s.Q(), C}, dtype, 24);
      Tensor dw = Tensor::empty({C, C, 3, 3});
      const double gflop = 2e-9 * double(s.N * s.P() * s.Q() * C * C * 9);
      time_op(fmt::format("conv bwd-weights 3x3 {} {}x{} stride {} {}", C, H, H, stride, dtype_name(dtype)),
              [&] { ops::conv2d_backward_weights(ctx, s, x, dy, dw, false); }, gflop);
    }
}

// ResNet-50's 1x1 stride-1 weight gradients (batch 16, bf16) as the CPU backend takes them (an
// inner product over the pixels), beside oneDNN's 1x1 convolution kernel and beside brgemm's
// matmul given the wider of dy and x channel-major, (channels, pixels), as no op here stores it;
// given it as it lies (a transposed view); and given the narrower one channel-major instead.
void time_pixel_weight_gradients(Context& ctx) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const memory::data_type bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
  dnnl::engine& engine = ops::cpu::cpu_engine();
  dnnl::stream stream(engine);
  for (const auto& [C, K, H] : kResNet1x1) {
    ops::ConvShape s;
    s.N = 16, s.H = s.W = H, s.C = C, s.K = K;
    const int64_t pixels = s.N * H * H, wide = std::max(C, K), narrow = std::min(C, K);
    Tensor x = random_tensor({s.N, H, H, C}, DType::bf16, 20), dy = random_tensor({s.N, H, H, K}, DType::bf16, 22);
    Tensor wide_t = random_tensor({wide, pixels}, DType::bf16, 23);  // dy' or x', channel-major
    Tensor dw = Tensor::empty({K, C, 1, 1});
    const double gflop = 2e-9 * double(pixels * C * K);
    const std::string name = fmt::format("{}->{} {}x{}", C, K, H, H);
    time_op("backend bwd-weights " + name, [&] { ops::conv2d_backward_weights(ctx, s, x, dy, dw, false); }, gflop);

    const memory::desc xd({s.N, C, H, H}, bf16, tag::nhwc), yd({s.N, K, H, H}, bf16, tag::nhwc);
    const dnnl::convolution_forward::primitive_desc fwd_pd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, xd,
         memory::desc({K, C, 1, 1}, bf16, tag::any), yd, {1, 1}, {0, 0}, {0, 0}},
        engine);
    const dnnl::convolution_backward_weights::primitive_desc conv_pd(
        {dnnl::algorithm::convolution_direct, xd, memory::desc({K, C, 1, 1}, f32, tag::any), yd, {1, 1}, {0, 0},
         {0, 0}},
        engine, fwd_pd);
    memory xm(xd, engine, x.data), dym(yd, engine, dy.data), dwm(conv_pd.diff_weights_desc(), engine);
    const dnnl::convolution_backward_weights conv(conv_pd);
    time_op(fmt::format("oneDNN {} {}", conv_pd.impl_info_str(), name), [&] {
      conv.execute(stream, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_WEIGHTS, dwm}});
      stream.wait();
    }, gflop);

    // brgemm's matmul, f32 (rows of a, columns of b) = a x b, over these descriptors and data.
    const auto time_matmul = [&](const std::string& what, const memory::desc& a, void* a_data, const memory::desc& b,
                                 void* b_data) {
      const memory::desc c({a.dims()[0], b.dims()[1]}, f32, tag::ab);
      const dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine));
      memory am(a, engine, a_data), bm(b, engine, b_data), cm(c, engine);
      time_op(fmt::format("matmul, {}, {}", what, name), [&] {
        mm.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        stream.wait();
      }, gflop);
    };
    const char *wide_name = K >= C ? "dy" : "x", *narrow_name = K >= C ? "x" : "dy";
    void *wide_data = K >= C ? dy.data : x.data, *narrow_data = K >= C ? x.data : dy.data;
    const memory::desc narrow_rows({pixels, narrow}, bf16, tag::ab);
    // (wide, narrow): the wide operand channel-major, then as it lies (a transposed view).
    time_matmul(fmt::format("{} channel-major", wide_name), memory::desc({wide, pixels}, bf16, tag::ab), wide_t.data,
                narrow_rows, narrow_data);
    time_matmul(fmt::format("{} transposed view", wide_name), memory::desc({wide, pixels}, bf16, tag::ba),
                wide_data, narrow_rows, narrow_data);
    // (narrow, wide): the narrow operand channel-major, the wide one as it lies.
    Tensor narrow_t = random_tensor({narrow, pixels}, DType::bf16, 24);
    time_matmul(fmt::format("narrow {} channel-major", narrow_name), memory::desc({narrow, pixels}, bf16, tag::ab),
                narrow_t.data, memory::desc({pixels, wide}, bf16, tag::ab), wide_data);
  }
}

// ResNet-50's stride-1 3x3 input gradients (batch 16) as the CPU backend takes them, beside the
// forward convolution of the same shape: such an input gradient is that forward over dy with the
// weights flipped and their channels swapped (the flip itself not timed).
void time_input_gradients(Context& ctx) {
  const int64_t shapes[][2] = {{64, 56}, {128, 28}, {256, 14}, {512, 7}};  // channels, size
  for (const DType dtype : {DType::bf16, DType::f32})
    for (const auto& [C, H] : shapes) {
      ops::ConvShape s;
      s.N = 16, s.H = s.W = H, s.C = s.K = C, s.R = s.S = 3, s.pad_h = s.pad_w = 1;
      Tensor dx = random_tensor({s.N, H, H, C}, dtype, 25), dy = random_tensor({s.N, H, H, C}, dtype, 26);
      Tensor w = random_tensor({C, C, 3, 3}, dtype, 27);
      const double gflop = 2e-9 * double(s.N * H * H * C * C * 9);
      const std::string name = fmt::format("3x3 {} {}x{} {}", C, H, H, dtype_name(dtype));
      time_op("conv bwd-data " + name, [&] { ops::conv2d_backward_data(ctx, s, dy, w, dx); }, gflop);
      time_op("conv fwd " + name, [&] { ops::conv2d_forward(ctx, s, dy, w, dx); }, gflop);
    }
}

// The peer of kiln's batch norm: oneDNN's own primitive (scale, shift, fused ReLU) on the same
// (N, H, W, C) bf16 tensors, training forward and backward.
void time_onednn_batchnorm(const Tensor& x, Tensor& y, const Tensor& dy, Tensor& dx) {
  using dnnl::memory;
  dnnl::engine& engine = ops::cpu::cpu_engine();
  dnnl::stream stream(engine);
  const memory::desc data({x.dim(0), x.dim(3), x.dim(1), x.dim(2)}, memory::data_type::bf16, memory::format_tag::nhwc);
  const memory::desc channels({x.dim(3)}, memory::data_type::f32, memory::format_tag::a);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift |
                     dnnl::normalization_flags::fuse_norm_relu;
  const dnnl::batch_normalization_forward::primitive_desc fwd_pd(
      {dnnl::prop_kind::forward_training, data, 1e-5f, flags}, engine);
  const dnnl::batch_normalization_backward::primitive_desc bwd_pd({dnnl::prop_kind::backward, data, data, 1e-5f, flags},
                                                                  engine, fwd_pd);
  memory src(data, engine, x.data), dst(data, engine, y.data);
  memory diff_dst(data, engine, dy.data), diff_src(data, engine, dx.data);
  memory workspace(fwd_pd.workspace_desc(), engine);
  std::vector<memory> c;
  for (int i = 0; i < 6; ++i) c.emplace_back(channels, engine);
  for (int i = 0; i < x.dim(3); ++i) static_cast<float*>(c[0].get_data_handle())[i] = 1.0f;  // host-side setup
  for (int i = 0; i < x.dim(3); ++i) static_cast<float*>(c[1].get_data_handle())[i] = 0.0f;
  const dnnl::batch_normalization_forward fwd(fwd_pd);
  const dnnl::batch_normalization_backward bwd(bwd_pd);
  time_op(fmt::format("  oneDNN {} forward relu (peer)", fwd_pd.impl_info_str()), [&] {
    fwd.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, c[0]}, {DNNL_ARG_SHIFT, c[1]},
                         {DNNL_ARG_MEAN, c[2]}, {DNNL_ARG_VARIANCE, c[3]}, {DNNL_ARG_WORKSPACE, workspace}});
  });
  time_op(fmt::format("  oneDNN {} backward relu (peer)", bwd_pd.impl_info_str()), [&] {
    bwd.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src},
                         {DNNL_ARG_SCALE, c[0]}, {DNNL_ARG_SHIFT, c[1]}, {DNNL_ARG_MEAN, c[2]},
                         {DNNL_ARG_VARIANCE, c[3]}, {DNNL_ARG_WORKSPACE, workspace}, {DNNL_ARG_DIFF_SCALE, c[4]},
                         {DNNL_ARG_DIFF_SHIFT, c[5]}});
  });
}

// Batch norm's passes over (16, 56, 56, C) bf16 from cold caches, as in a training step, beside a
// copy and a residual add of the same size: GB/s of what each reads and writes.
void time_batchnorm_cold(Context& ctx) {
  for (const int64_t C : {64, 256}) {
    const Shape shape{16, 56, 56, C};
    Tensor x = random_tensor(shape, DType::bf16, 30), dy = random_tensor(shape, DType::bf16, 31);
    Tensor y = random_tensor(shape, DType::bf16, 32), dx = Tensor::empty(shape, DType::bf16);
    Tensor gamma = random_tensor({C}, DType::f32, 33), beta = random_tensor({C}, DType::f32, 34);
    Tensor mean = Tensor::empty({C}), var = Tensor::empty({C}), dgamma = Tensor::empty({C}), dbeta = Tensor::empty({C});
    Tensor sums = Tensor::empty({C}, DType::f64);
    const double mb = double(x.numel()) * 2 / 1e6;  // one tensor
    fmt::print("(16, 56, 56, {}) bf16, {:.1f} MB a tensor, cold caches\n", C, mb);
    time_cold("  copy (read 1, write 1)", [&] { ops::copy(ctx, x, dx); }, 2 * mb);
    time_cold("  residual_add (read 2, write 1)", [&] { ops::residual_add(ctx, x, dx); }, 3 * mb);
    time_cold("  batchnorm_channel_sums (read 1)", [&] { ops::batchnorm_channel_sums(ctx, x, sums); }, mb);
    time_cold("  batchnorm_train_forward relu (read 2, write 1)",
              [&] { ops::batchnorm_train_forward(ctx, x, gamma, beta, 1e-5f, true, y, mean, var); }, 3 * mb);
    time_cold("  batchnorm_backward (read 4, write 1)", [&] {
      ops::batchnorm_backward(ctx, x, y, dy, gamma, mean, var, 1e-5f, false, true, dx, dgamma, dbeta);
    }, 5 * mb);
    time_cold("  batchnorm_backward relu (read 6, write 1)", [&] {
      ops::batchnorm_backward(ctx, x, y, dy, gamma, mean, var, 1e-5f, true, true, dx, dgamma, dbeta);
    }, 7 * mb);
  }
}

// ResNet-50's elementwise passes and batch norm on its largest activation (16, 56, 56, 256) bf16
// (and oneDNN's batch norm on it), and its max pool.
void time_resnet_passes(Context& ctx) {
  const Shape shape{16, 56, 56, 256};
  Tensor a = random_tensor(shape, DType::bf16, 30), b = random_tensor(shape, DType::bf16, 31);
  Tensor y = random_tensor(shape, DType::bf16, 32), d = Tensor::empty(shape, DType::bf16);
  Tensor gamma = random_tensor({256}, DType::f32, 33), beta = random_tensor({256}, DType::f32, 34);
  Tensor mean = Tensor::empty({256}), var = Tensor::empty({256});
  Tensor dgamma = Tensor::empty({256}), dbeta = Tensor::empty({256});
  time_op("relu_backward (16, 56, 56, 256)", [&] { ops::relu_backward(ctx, y, a, d); });
  time_op("residual_add (16, 56, 56, 256)", [&] { ops::residual_add(ctx, a, d); });
  time_op("batchnorm_train_forward relu (16, 56, 56, 256)",
          [&] { ops::batchnorm_train_forward(ctx, a, gamma, beta, 1e-5f, true, y, mean, var); });
  time_op("batchnorm_train_forward + shortcut + relu (the join)",
          [&] { ops::batchnorm_train_forward(ctx, a, gamma, beta, 1e-5f, true, y, mean, var, b); });
  Tensor sum = Tensor::empty({256}, DType::f64), squares = Tensor::empty({256}, DType::f64);
  // SyncBN's two passes for the statistics (one process reads x once, in the op above).
  time_op("batchnorm_channel_sums (SyncBN's 1st pass)", [&] { ops::batchnorm_channel_sums(ctx, a, sum); });
  time_op("batchnorm_channel_deviations (SyncBN's 2nd)",
          [&] { ops::batchnorm_channel_deviations(ctx, a, sum, a.numel() / 256, squares); });
  for (const bool relu : {true, false})
    time_op(fmt::format("batchnorm_backward{} (16, 56, 56, 256)", relu ? " relu" : ""), [&] {
      ops::batchnorm_backward(ctx, a, y, b, gamma, mean, var, 1e-5f, relu, true, d, dgamma, dbeta);
    });
  Tensor sums = Tensor::empty({2 * 256}, DType::f64);
  time_op("  batchnorm_backward_sums relu (its 1st pass)",
          [&] { ops::batchnorm_backward_sums(ctx, a, y, b, mean, true, sums); });
  time_onednn_batchnorm(a, y, b, d);
  // The stem's 3x3 stride-2 max pool.
  ops::PoolShape pool;
  pool.N = 16, pool.H = pool.W = 112, pool.C = 64, pool.R = pool.S = 3;
  pool.stride_h = pool.stride_w = 2, pool.pad_h = pool.pad_w = 1;
  Tensor stem = random_tensor({16, 112, 112, 64}, DType::bf16, 35), dstem = Tensor::empty(stem.shape, DType::bf16);
  Tensor pooled = random_tensor({16, 56, 56, 64}, DType::bf16, 36);
  Tensor argmax = Tensor::empty(pooled.shape, DType::i32);
  time_op("maxpool_forward (16, 112, 112, 64)", [&] { ops::maxpool_forward(ctx, pool, stem, pooled, argmax); });
  time_op("maxpool_backward (16, 112, 112, 64)", [&] { ops::maxpool_backward(ctx, pool, pooled, argmax, dstem); });
}

// BERT-large's attention probabilities (B 2, 16 heads, S 512) in bf16 around their softmax: the
// forward's softmax and dropout, and backward's passes (dropout mask again, dropout gradient,
// softmax gradient), each alone and fused (attention_probs_forward / _backward).
void time_attention_probs(Context& ctx) {
  const Shape shape{2, 16, 512, 512};
  Tensor scores = random_tensor(shape, DType::f32, 40), dprobs = random_tensor(shape, DType::f32, 41);
  Tensor probs = Tensor::empty(shape, DType::bf16), dropped = Tensor::empty(shape, DType::bf16);
  Tensor dscores = Tensor::empty(shape, DType::bf16), dp = Tensor::empty(shape);
  Tensor mask = Tensor::empty({2, 512}, DType::i32);
  for (int64_t i = 0; i < mask.numel(); ++i) mask.ptr<int32_t>()[i] = i % 512 < 400;  // host-side setup
  int64_t first_sample = 0;
  const Tensor offset = Tensor::view(&first_sample, {1}, DType::i64);
  const RngStream rng{1, rng_stream(RngPurpose::dropout, 0, 0)};
  time_op("attention_softmax_forward (2, 16, 512, 512)", [&] { ops::attention_softmax_forward(ctx, scores, mask, probs); });
  time_op("dropout_forward probs", [&] { ops::dropout_forward(ctx, probs, {0.1f, rng, offset, 2}, dropped); });
  time_op("dropout_backward dprobs (f32)", [&] { ops::dropout_backward(ctx, dprobs, {0.1f, rng, offset, 2}, dp); });
  time_op("dropout_backward dprobs in place (f32)", [&] { ops::dropout_backward(ctx, dprobs, {0.1f, rng, offset, 2}, dprobs); });
  time_op("softmax_backward", [&] { ops::softmax_backward(ctx, probs, dp, 0.125f, dscores); });
  const ops::DropoutMask drop{0.1f, rng, offset, 2};
  time_op("attention_probs_forward (fused)",
          [&] { ops::attention_probs_forward(ctx, scores, mask, drop, probs, dropped); });
  time_op("attention_probs_backward (fused)",
          [&] { ops::attention_probs_backward(ctx, probs, dprobs, drop, 0.125f, dscores, dropped); });
}

void time_optimizer_passes(Context& ctx) {
  Tensor grads = random_tensor({kParams}, DType::f32, 7);
  const std::vector<ops::TensorSegment> whole = {{0, kParams, true}};
  Tensor sums = Tensor::empty({1}, DType::i64);
  time_op("segment_sum_squares (110M)", [&] { ops::segment_sum_squares(ctx, grads, Tensor{}, whole, sums); });
  time_op("fill (110M)", [&] { ops::fill(ctx, grads, 0.0f); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) omp_set_num_threads(std::atoi(argv[1]));
  Context ctx = cpu_context();
  ctx.scratch = &scratch_arena;
  if (argc > 2 && std::string(argv[2]) == "conv") return time_pixel_products(ctx), 0;
  if (argc > 2 && std::string(argv[2]) == "wgrad") return time_window_products(ctx), 0;
  if (argc > 2 && std::string(argv[2]) == "wgrad1x1") return time_pixel_weight_gradients(ctx), 0;
  if (argc > 2 && std::string(argv[2]) == "dgrad") return time_input_gradients(ctx), 0;
  if (argc > 2 && std::string(argv[2]) == "bn") return time_batchnorm_cold(ctx), 0;
  if (argc > 2 && std::string(argv[2]) == "resnet") return time_resnet_passes(ctx), 0;
  if (argc > 2 && std::string(argv[2]) == "attention") return time_attention_probs(ctx), 0;
  time_rows(ctx);
  time_linear(ctx, kHidden, 3 * kHidden);
  time_linear(ctx, kHidden, kHidden);
  time_linear(ctx, kHidden, kFfn);
  time_linear(ctx, kFfn, kHidden);
  time_linear(ctx, kHidden, kVocab, 160);  // the MLM decoder over 20 predictions a sample
  time_linear(ctx, kHidden, kHidden, 8);    // the pooler
  for (const int64_t rows : {16, 64, 160, 1024}) time_linear(ctx, 2048, 1000, rows, DType::f32);  // ResNet's classifier
  time_linear(ctx, kHidden, kFfn, kRows, DType::f32);
  time_linear(ctx, kFfn, kHidden, kRows, DType::f32);
  time_linear(ctx, kHidden, kVocab, 160, DType::f32);
  time_attention(ctx);
  time_optimizer_passes(ctx);
}
