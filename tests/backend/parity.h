// tests/backend/parity.h — the backend parity harness. Every op of backend.h is run on the
// device under test (KILN_PARITY_DEVICE: "cpu" by default, "cuda:0" for the GPU backend) for
// random shapes and each dtype it takes, and compared with a float64 reference computed on the
// host from the same (rounded) inputs. A new backend only has to pass these tests.
//
//   Parity p;                                       // context on the device under test
//   Tensor x = p.random({17, 65}, DType::bf16, 1);  // on the device, N(0, 1) rounded to bf16
//   std::vector<double> xd = p.host(x);             // the values the op actually sees
//   ... ops::op(p.ctx, x, y) ...; ... reference in double ...
//   p.expect_close(y, want, "op name");             // tolerance of y's dtype
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/core/context.h"
#include "random_fill.h"

namespace kiln::testing {

// Relative tolerance (max error / max |reference|) for results stored in `dtype`: a few units
// of the last place of the storage type, plus f32 accumulation error.
inline double parity_tolerance(DType dtype) {
  switch (dtype) {
    case DType::bf16: return 1.6e-2;  // 8 significant bits
    case DType::f16: return 2e-3;     // 11 significant bits
    default: return 2e-5;
  }
}

// KILN_PARITY_DEVICE: cpu (default), cuda, cuda:N, or sim (the CPU kernels through device
// tensors: host code that touches their data outside an op is an error there).
inline Device parity_device() {
  const char* env = std::getenv("KILN_PARITY_DEVICE");
  return env ? parse_device(env, "KILN_PARITY_DEVICE") : Device::cpu();
}

// The floating-point dtypes every float op is checked in.
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> all{DType::f32, DType::bf16, DType::f16};
  return all;
}

// The documented dropout mask: element i of global sample g is dropped when the Philox block at
// counter (g << 32) | (i / 4) gives, in lane i % 4, a uniform below p.
inline bool dropout_drops(const RngStream& rng, uint64_t g, int64_t i, float p) {
  return u32_to_unit_float(rng.block((g << 32) | uint64_t(i / 4))[size_t(i % 4)]) < p;
}

struct Parity {
  Context ctx = device_context(parity_device());  // a GPU's own stream

  // A tensor on the device under test from host values converted to `dtype`.
  Tensor from_host(const std::vector<float>& v, const Shape& shape, DType dtype) {
    Tensor host_f32 = Tensor::view(const_cast<float*>(v.data()), shape);
    Tensor host = Tensor::empty(shape, dtype);
    ops::cast(cpu_context(), host_f32, host);
    Tensor dev = Tensor::empty(shape, dtype, ctx.device);
    ops::copy(ctx, host, dev);
    return dev;
  }
  // A copy of a host tensor (any dtype: ids, masks, labels) on the device under test.
  Tensor to_device(const Tensor& host) {
    Tensor dev = Tensor::empty(host.shape, host.dtype, ctx.device);
    ops::copy(ctx, host, dev);
    return dev;
  }
  // A dropout op's sample offset: one i64 on the device.
  Tensor sample_offset(int64_t first_sample) { return to_device(Tensor::view(&first_sample, {1}, DType::i64)); }
  // scale * N(0, 1) from test stream `id`, rounded to `dtype`, on the device.
  Tensor random(const Shape& shape, DType dtype, uint32_t id, float scale = 1.0f) {
    return from_host(random_normal(shape_numel(shape), id, scale), shape, dtype);
  }
  Tensor zeros(const Shape& shape, DType dtype) {
    Tensor t = Tensor::empty(shape, dtype, ctx.device);
    ops::fill(ctx, t, 0.0f);
    return t;
  }
  // The tensor's values as double on the host (exactly the rounded values it holds).
  std::vector<double> host(const Tensor& t) {
    Tensor h = Tensor::empty(t.shape, t.dtype);
    ops::copy(ctx, t, h);
    Tensor f = Tensor::empty(t.shape, DType::f32);
    ops::cast(cpu_context(), h, f);
    return std::vector<double>(f.ptr<float>(), f.ptr<float>() + f.numel());
  }
  // Relative error of `got` against the float64 reference within the tolerance of got.dtype
  // (or `tol` when given).
  void expect_close(const Tensor& got, const std::vector<double>& want, const std::string& what,
                    double tol = 0) {
    const std::vector<double> g = host(got);
    ASSERT_EQ(g.size(), want.size()) << what;
    const double limit = tol > 0 ? tol : parity_tolerance(got.dtype);
    EXPECT_LE(max_rel_error(g, want), limit)
        << what << " in " << dtype_name(got.dtype) << " shape " << shape_str(got.shape);
  }
};

}  // namespace kiln::testing
