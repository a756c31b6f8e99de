// backend/cuda/graph.cc — OpGraph on a GPU: stream capture (thread-local mode, so that other
// threads' CUDA calls are not affected) into a CUDA graph, instantiated once, launched on the
// context's stream at each replay.
#include <cuda_runtime_api.h>

#include "kiln/backend/cuda/cuda_ops.h"
#include "kiln/backend/cuda/runtime.h"
#include "kiln/core/error.h"

namespace kiln::ops::cuda {
namespace {

class CudaGraph final : public OpGraph {
 public:
  CudaGraph(Context& ctx, cudaGraph_t graph) : OpGraph(ctx), graph_(graph) {
    check(cudaGraphGetNodes(graph_, nullptr, &nodes_), "graph nodes");
    check(cudaGraphInstantiate(&exec_, graph_, 0), "graph instantiate");
  }
  ~CudaGraph() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  size_t size() const override { return nodes_; }

 private:
  void launch() override { check(cudaGraphLaunch(exec_, stream_of(ctx_)), "graph launch"); }
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

}  // namespace

std::unique_ptr<OpGraph> capture_graph(Context& ctx, const std::function<void()>& body) {
  KILN_CHECK(ctx.stream, "graph capture on {}: the context has no stream of its own (the default stream "
             "cannot be captured)", ctx.device.str());
  const cudaStream_t stream = stream_of(ctx);
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "graph capture");
  try {
    body();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(stream, &broken);  // ends the capture; its error is the exception's cause
    if (broken) cudaGraphDestroy(broken);
    throw;
  }
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream, &graph), "graph capture");
  return std::make_unique<CudaGraph>(ctx, graph);
}

}  // namespace kiln::ops::cuda
