// backend/cuda/rows.cu — row softmax and LayerNorm forward (the bodies of bodies.h, one thread
// per row), and the row, column and loss bodies of bodies_rows.h and bodies_losses.h.
#include "kiln/backend/cuda/bodies.h"
#include "kiln/backend/cuda/bodies_losses.h"
#include "kiln/backend/cuda/bodies_rows.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/launch.cuh"

namespace kiln::ops::cuda {

void launch_softmax_rows(const Tensor& x, Tensor& y, int64_t cols, void* stream) {
  with_float_type(x.dtype, [&](auto xt) {
    with_float_type(y.dtype, [&](auto yt) {
      using X = decltype(xt);
      using Y = decltype(yt);
      launch(x.numel() / cols, SoftmaxRowBody<X, Y>{x.ptr<X>(), y.ptr<Y>(), cols}, stream);
    });
  });
}

void launch_layernorm_rows(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y,
                           Tensor& mean, Tensor& rstd, void* stream) {
  const int64_t C = w.numel();
  with_float_type(x.dtype, [&](auto xt) {
    with_float_type(w.dtype, [&](auto wt) {
      with_float_type(y.dtype, [&](auto yt) {
        using X = decltype(xt);
        using W = decltype(wt);
        using Y = decltype(yt);
        const LayerNormRowBody<X, W, Y> body{x.ptr<X>(),       w.ptr<W>(),       b.ptr<W>(),
                                             y.ptr<Y>(),       mean.ptr<float>(), rstd.ptr<float>(),
                                             C,                eps};
        launch(x.numel() / C, body, stream);
      });
    });
  });
}

template void run_kernel(int64_t, const SoftmaxBackwardRowBody&, void*);
template void run_kernel(int64_t, const AttentionSoftmaxRowBody&, void*);
template void run_kernel(int64_t, const LayerNormBackwardRowBody&, void*);
template void run_kernel(int64_t, const LayerNormParamGradBody&, void*);
template void run_kernel(int64_t, const BiasGradBody&, void*);
template void run_kernel(int64_t, const GatherBody&, void*);
template void run_kernel(int64_t, const ScatterAddBody&, void*);
template void run_kernel(int64_t, const XentRowBody&, void*);
template void run_kernel(int64_t, const XentTotalsBody&, void*);
template void run_kernel(int64_t, const XentGradBody&, void*);
template void run_kernel(int64_t, const VocabPartialsBody&, void*);
template void run_kernel(int64_t, const VocabSumexpBody&, void*);
template void run_kernel(int64_t, const VocabCombineBody&, void*);
template void run_kernel(int64_t, const VocabRowTotalsBody&, void*);
template void run_kernel(int64_t, const VocabGradBody&, void*);

}  // namespace kiln::ops::cuda
