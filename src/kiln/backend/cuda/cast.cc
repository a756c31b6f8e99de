// backend/cuda/cast.cc — fill, copy, cast and the staged copy from the host on CUDA: checks, then
// a body of elementwise_bodies.h or a cudaMemcpyAsync on the context's stream; page-locked host tensors and
// the copy stream for staging; the backend's registration.
#include <algorithm>
#include <cstring>
#include <memory>

#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/elementwise_bodies.h"
#include "kiln/backend/cuda/op_checks.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

std::shared_ptr<void> new_event(const char* op) {
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), op);
  return {event, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }};
}

cudaEvent_t event_of(const std::shared_ptr<void>& e) { return static_cast<cudaEvent_t>(e.get()); }

// A tensor over memory from `alloc` (at least 64 bytes), given back by `release` with the last view.
template <typename Alloc, typename Release>
Tensor owning_tensor(const Shape& shape, DType dtype, const Device& device, const char* what, Alloc alloc,
                     Release release) {
  Tensor t;
  t.shape = shape;
  t.dtype = dtype;
  t.device = device;
  void* p = nullptr;
  check(alloc(&p, std::max<size_t>(t.nbytes(), 64)), what);
  t.storage = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), release);
  t.data = p;
  return t;
}

}  // namespace

void register_backend() { register_allocator(); }

// Zero fills any dtype (f64 sums, i64 totals), as on the CPU.
void fill(Context& ctx, Tensor& t, float value) {
  const OpScope scope = expect_cuda(ctx, "fill", {&t});
  if (value == 0.0f) {
    check(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_of(ctx)), "fill");
    return;
  }
  if (t.dtype == DType::i32) return run(ctx, "fill", t.numel(), FillBody<int32_t>{t.ptr<int32_t>(), int32_t(value)});
  with_float_type(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    run(ctx, "fill", t.numel(), FillBody<T>{t.ptr<T>(), store<T>(value)});
  });
}

// Any direction between host and device memory; returns when a host destination holds the data
// and a host source may be reused.
void copy(Context& ctx, const Tensor& src, Tensor& dst) {
  KILN_CHECK(src.dtype == dst.dtype, "op copy: dtypes {} and {} differ", dtype_name(src.dtype),
             dtype_name(dst.dtype));
  expect_same_numel("copy", src, dst);
  const Device gpu = src.device.is_cpu() ? dst.device : src.device;
  require_device(gpu);
  const cudaStream_t s = on_cuda(ctx) ? stream_of(ctx) : nullptr;
  const OpScope scope = profiled_scope("copy", s);
  if (src.data == dst.data || src.nbytes() == 0) return;
  check(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDefault, s), "copy");
  if (src.device.is_cpu() || dst.device.is_cpu()) check(cudaStreamSynchronize(s), "copy");
}

Tensor pinned_host_tensor(const Shape& shape, DType dtype) {
  return owning_tensor(shape, dtype, Device::cpu(), "page-locked host memory",
                       [](void** p, size_t n) { return cudaMallocHost(p, n); }, [](std::byte* q) { cudaFreeHost(q); });
}

// host -> pinned (the host waits for the previous bus copy out of `pinned` only); pinned ->
// landing on the copy stream, after the op stream's previous copy out of `landing`; landing ->
// dst on the op stream, after the bus copy.
void staged_copy(Context& ctx, const Tensor& host, Tensor& dst, HostStaging& staging) {
  const char* op = "staged_copy";
  const OpScope scope = expect_cuda(ctx, op, {&dst});
  KILN_CHECK(host.device.is_cpu(), "op {}: the source is on {}, not the host", op, host.device.str());
  KILN_CHECK(host.dtype == dst.dtype, "op {}: dtypes {} and {} differ", op, dtype_name(host.dtype),
             dtype_name(dst.dtype));
  expect_same_numel(op, host, dst);
  const cudaStream_t s = stream_of(ctx);
  KILN_CHECK(!capturing(s, op),
             "op {}: inside a graph capture; copies from the host run outside the captured ops", op);
  const size_t bytes = host.nbytes();
  if (bytes == 0) return;
  if (!staging.landed) {
    staging.landed = new_event(op);
    staging.drained = new_event(op);
  } else {
    check(cudaEventSynchronize(event_of(staging.landed)), op);
  }
  const Shape words{int64_t((bytes + 7) / 8)};
  if (staging.pinned.nbytes() < bytes) staging.pinned = pinned_host_tensor(words, DType::i64);
  if (staging.landing.nbytes() < bytes) {
    check(cudaStreamSynchronize(s), op);  // the old landing may still be read
    // Outside the tensor allocator, as the page-locked staging is outside the host's count:
    // staging is not the model's memory, so `--dry-run`'s estimate stays the measured peak.
    staging.landing = owning_tensor(
        words, DType::i64, dst.device, "staging device memory",
        [](void** p, size_t n) { return cudaMalloc(p, n); }, [](std::byte* q) { cudaFree(q); });
  }
  std::memcpy(staging.pinned.data, host.data, bytes);
  const cudaStream_t bus = copy_stream(dst.device.index);
  check(cudaStreamWaitEvent(bus, event_of(staging.drained), 0), op);
  check(cudaMemcpyAsync(staging.landing.data, staging.pinned.data, bytes, cudaMemcpyHostToDevice, bus), op);
  check(cudaEventRecord(event_of(staging.landed), bus), op);
  check(cudaStreamWaitEvent(s, event_of(staging.landed), 0), op);
  check(cudaMemcpyAsync(dst.data, staging.landing.data, bytes, cudaMemcpyDeviceToDevice, s), op);
  check(cudaEventRecord(event_of(staging.drained), s), op);
}

void cast(Context& ctx, const Tensor& src, Tensor& dst) {
  const OpScope scope = expect_cuda(ctx, "cast", {&src, &dst});
  if (src.dtype == dst.dtype) {
    if (src.data != dst.data)
      check(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice,
                            stream_of(ctx)),
            "cast");
    return;
  }
  with_float_types([&](auto s, auto d) {
    using S = decltype(s);
    using D = decltype(d);
    const S* from = src.ptr<S>();
    D* to = dst.ptr<D>();
    run_spans(ctx, "cast", CastBody<S, D>{from, to, src.numel(), packs_aligned(from, to)});
  }, src.dtype, dst.dtype);
}

}  // namespace kiln::ops::cuda
