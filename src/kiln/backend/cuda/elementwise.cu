// backend/cuda/elementwise.cu — fill, cast, add, scale, GELU and dropout kernels, and the
// elementwise bodies that elementwise.cc and relu.cc run: the bodies of bodies.h over one item per
// element (per Philox block for dropout).
#include "kiln/backend/cuda/bodies.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/launch.cuh"

namespace kiln::ops::cuda {

void launch_fill(Tensor& t, float value, void* stream) {
  if (t.dtype == DType::i32) {
    launch(t.numel(), FillBody<int32_t>{t.ptr<int32_t>(), int32_t(value)}, stream);
    return;
  }
  with_float_type(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    launch(t.numel(), FillBody<T>{t.ptr<T>(), store<T>(value)}, stream);
  });
}

void launch_cast(const Tensor& src, Tensor& dst, void* stream) {
  with_float_type(src.dtype, [&](auto s) {
    with_float_type(dst.dtype, [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      launch(src.numel(), CastBody<S, D>{src.ptr<S>(), dst.ptr<D>()}, stream);
    });
  });
}

void launch_add(const Tensor& a, const Tensor& b, Tensor& out, void* stream) {
  with_float_type(a.dtype, [&](auto at) {
    with_float_type(b.dtype, [&](auto bt) {
      with_float_type(out.dtype, [&](auto ot) {
        using A = decltype(at);
        using B = decltype(bt);
        using O = decltype(ot);
        launch(out.numel(), AddBody<A, B, O>{a.ptr<A>(), b.ptr<B>(), out.ptr<O>()}, stream);
      });
    });
  });
}

void launch_scale(const Tensor& x, float s, Tensor& y, void* stream) {
  with_float_type(x.dtype, [&](auto xt) {
    with_float_type(y.dtype, [&](auto yt) {
      using X = decltype(xt);
      using Y = decltype(yt);
      launch(y.numel(), ScaleBody<X, Y>{x.ptr<X>(), y.ptr<Y>(), s}, stream);
    });
  });
}

void launch_gelu_forward(bool tanh_form, const Tensor& x, Tensor& y, void* stream) {
  with_float_type(x.dtype, [&](auto xt) {
    with_float_type(y.dtype, [&](auto yt) {
      using X = decltype(xt);
      using Y = decltype(yt);
      launch(y.numel(), GeluForwardBody<X, Y>{x.ptr<X>(), y.ptr<Y>(), tanh_form}, stream);
    });
  });
}

void launch_gelu_backward(bool tanh_form, const Tensor& x, const Tensor& dy, Tensor& dx,
                          void* stream) {
  with_float_type(x.dtype, [&](auto xt) {
    with_float_type(dy.dtype, [&](auto dt) {
      with_float_type(dx.dtype, [&](auto ot) {
        using X = decltype(xt);
        using D = decltype(dt);
        using O = decltype(ot);
        const GeluBackwardBody<X, D, O> body{x.ptr<X>(), dy.ptr<D>(), dx.ptr<O>(), tanh_form};
        launch(dx.numel(), body, stream);
      });
    });
  });
}

void launch_dropout(const DropoutArgs& a, const Tensor& x, Tensor& y, void* stream) {
  const int64_t per = x.numel() / a.samples, first = a.element_offset / 4,
                blocks = (a.element_offset + per + 3) / 4 - first;
  with_float_type(x.dtype, [&](auto xt) {
    with_float_type(y.dtype, [&](auto yt) {
      using X = decltype(xt);
      using Y = decltype(yt);
      const DropoutBody<X, Y> body{x.ptr<X>(), y.ptr<Y>(), a.rng, a.sample_offset, per, a.element_offset,
                                   first,      blocks,     a.p,   1.0f / (1.0f - a.p)};
      launch(a.samples * blocks, body, stream);
    });
  });
}

template void run_kernel(int64_t, const TanhForwardBody&, void*);
template void run_kernel(int64_t, const TanhBackwardBody&, void*);
template void run_kernel(int64_t, const ReluForwardBody&, void*);
template void run_kernel(int64_t, const ReluBackwardBody&, void*);
template void run_kernel(int64_t, const AccumulateBody&, void*);
template void run_kernel(int64_t, const BiasAddBody&, void*);
template void run_kernel(int64_t, const ScaleBody<float, float>&, void*);

}  // namespace kiln::ops::cuda
