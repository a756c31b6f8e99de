#include "kiln/dist/staged_communicator.h"

#include "kiln/backend/backend.h"
#include "kiln/backend/devices.h"
#include "kiln/dist/pooled_request.h"

namespace kiln::dist {
namespace {

// A host request whose host buffer is copied into the device tensor once it completes (receives,
// reductions), or only kept alive until then (sends: `device` undefined).
class StagedRequest final : public Request, public PooledRequest<StagedRequest> {
 public:
  StagedRequest(std::unique_ptr<Request> host_request, Tensor host, Tensor device, Context& ctx)
      : request_(std::move(host_request)), host_(std::move(host)), device_(std::move(device)), ctx_(ctx) {}
  void wait() override {
    request_->wait();
    if (device_.defined() && device_.data != host_.data) ops::copy(ctx_, host_, device_);
  }

 private:
  std::unique_ptr<Request> request_;
  Tensor host_, device_;
  Context& ctx_;
};

}  // namespace

StagedCommunicator::StagedCommunicator(Communicator& host, Device device)
    : host_(host), ctx_(device_context(device)) {}

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> owned, Device device)
    : owned_(std::move(owned)), host_(*owned_), ctx_(device_context(device)) {}

Tensor StagedCommunicator::host_buffer(const Tensor& t) {
  if (t.device.is_cpu()) return t;
  Tensor& buffer = buffers_[{t.data, t.nbytes()}];
  if (!buffer.defined() || buffer.dtype != t.dtype) buffer = ops::host_staging_tensor(ctx_, t.shape, t.dtype);
  Tensor view = buffer;
  view.shape = t.shape;
  return view;
}

Tensor StagedCommunicator::staged(const Tensor& t) {
  Tensor h = host_buffer(t);
  if (h.data != t.data) ops::copy(ctx_, t, h);
  return h;
}

void StagedCommunicator::all_reduce_sum(Tensor& t) {
  Tensor h = staged(t);
  host_.all_reduce_sum(h);
  if (h.data != t.data) ops::copy(ctx_, h, t);
}

std::unique_ptr<Request> StagedCommunicator::iall_reduce_sum(Tensor& t) {
  Tensor h = staged(t);
  std::unique_ptr<Request> r = host_.iall_reduce_sum(h);
  return std::make_unique<StagedRequest>(std::move(r), h, t, ctx_);
}

void StagedCommunicator::broadcast(Tensor& t, int root) {
  Tensor h = staged(t);
  host_.broadcast(h, root);
  if (h.data != t.data) ops::copy(ctx_, h, t);
}

void StagedCommunicator::all_gather(const Tensor& in, Tensor& out) {
  check_same_side("all_gather", in, out);
  Tensor h_in = staged(in);
  Tensor h_out = host_buffer(out);
  host_.all_gather(h_in, h_out);
  if (h_out.data != out.data) ops::copy(ctx_, h_out, out);
}

void StagedCommunicator::reduce_scatter_sum(const Tensor& in, Tensor& out) {
  check_same_side("reduce_scatter_sum", in, out);
  Tensor h_in = staged(in);
  Tensor h_out = host_buffer(out);
  host_.reduce_scatter_sum(h_in, h_out);
  if (h_out.data != out.data) ops::copy(ctx_, h_out, out);
}

std::unique_ptr<Request> StagedCommunicator::isend(const Tensor& t, int peer) {
  Tensor h = staged(t);
  std::unique_ptr<Request> r = host_.isend(h, peer);
  return std::make_unique<StagedRequest>(std::move(r), h, Tensor{}, ctx_);
}

std::unique_ptr<Request> StagedCommunicator::irecv(Tensor& t, int peer) {
  Tensor h = host_buffer(t);
  std::unique_ptr<Request> r = host_.irecv(h, peer);
  return std::make_unique<StagedRequest>(std::move(r), h, t, ctx_);
}

std::unique_ptr<Communicator> StagedCommunicator::split(int color, int key) {
  return std::unique_ptr<Communicator>(new StagedCommunicator(host_.split(color, key), ctx_.device));
}

}  // namespace kiln::dist
