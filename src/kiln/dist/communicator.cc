#include "kiln/dist/communicator.h"

#include <algorithm>
#include <cstring>

#include "kiln/core/error.h"
#include "kiln/dist/pooled_request.h"

namespace kiln::dist {
namespace {

class DoneRequest final : public Request, public PooledRequest<DoneRequest> {
 public:
  void wait() override {}
};

}  // namespace

std::unique_ptr<Request> Communicator::iall_reduce_sum(Tensor& t) {
  all_reduce_sum(t);
  return std::make_unique<DoneRequest>();
}

void check_collective_tensor(const Tensor& t, const char* op) {
  KILN_CHECK(t.device.is_cpu(), "{}: tensors must be on the host, got {}", op, t.device.str());
  KILN_CHECK(t.dtype == DType::f32 || t.dtype == DType::f64 || t.dtype == DType::i64 || t.dtype == DType::bf16 ||
                 t.dtype == DType::f16,
             "{}: dtype {} is not supported (f32, f64, i64, bf16, f16)", op, dtype_name(t.dtype));
}

void check_same_side(const char* op, const Tensor& in, const Tensor& out) {
  KILN_CHECK(in.device.is_cpu() == out.device.is_cpu(),
             "{}: input on {} and output on {}: a device transport takes both on the device or both on the host",
             op, in.device.str(), out.device.str());
}

void SingleProcess::all_reduce_sum(Tensor& t) { check_collective_tensor(t, "all_reduce_sum"); }

void SingleProcess::broadcast(Tensor& t, int root) {
  check_collective_tensor(t, "broadcast");
  KILN_CHECK(root == 0, "broadcast: root {} outside world size 1", root);
}

void SingleProcess::all_gather(const Tensor& in, Tensor& out) {
  check_collective_tensor(in, "all_gather");
  KILN_CHECK(out.dtype == in.dtype && out.numel() == in.numel(),
             "all_gather: output has {} elements of {}, expected {} of {}", out.numel(),
             dtype_name(out.dtype), in.numel(), dtype_name(in.dtype));
  if (out.data != in.data) std::memcpy(out.data, in.data, in.nbytes());
}

void SingleProcess::reduce_scatter_sum(const Tensor& in, Tensor& out) {
  check_collective_tensor(in, "reduce_scatter_sum");
  KILN_CHECK(out.dtype == in.dtype && out.numel() == in.numel(),
             "reduce_scatter_sum: output has {} elements of {}, expected {} of {}", out.numel(),
             dtype_name(out.dtype), in.numel(), dtype_name(in.dtype));
  if (out.data != in.data) std::memcpy(out.data, in.data, in.nbytes());
}

std::unique_ptr<Request> SingleProcess::isend(const Tensor&, int peer) {
  throw Error("send to rank {}: a single process has no other rank", peer);
}

std::unique_ptr<Request> SingleProcess::irecv(Tensor&, int peer) {
  throw Error("receive from rank {}: a single process has no other rank", peer);
}

std::unique_ptr<Communicator> SingleProcess::split(int, int) { return std::make_unique<SingleProcess>(); }

std::unique_ptr<Communicator> subgroup(Communicator& comm, const std::vector<int>& members) {
  KILN_CHECK(std::find(members.begin(), members.end(), comm.rank()) != members.end(),
             "subgroup: rank {} is not among its own group's members", comm.rank());
  return comm.split(members.front(), comm.rank());
}

void all_reduce_sum(Communicator& comm, std::span<double> values) {
  Tensor t = Tensor::view(values.data(), {int64_t(values.size())}, DType::f64);
  comm.all_reduce_sum(t);
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& text) {
  const int n = comm.size();
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  int64_t mine = int64_t(text.size());
  Tensor lengths_view = Tensor::view(lengths.data(), {n}, DType::i64);
  comm.all_gather(Tensor::view(&mine, {1}, DType::i64), lengths_view);
  const int64_t words = std::max<int64_t>(1, (*std::max_element(lengths.begin(), lengths.end()) + 7) / 8);
  std::vector<int64_t> padded(size_t(words), 0), all(size_t(words) * size_t(n));
  std::memcpy(padded.data(), text.data(), text.size());
  Tensor all_view = Tensor::view(all.data(), {int64_t(all.size())}, DType::i64);
  comm.all_gather(Tensor::view(padded.data(), {words}, DType::i64), all_view);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.emplace_back(reinterpret_cast<const char*>(all.data() + size_t(r) * size_t(words)), size_t(lengths[size_t(r)]));
  return out;
}

}  // namespace kiln::dist
