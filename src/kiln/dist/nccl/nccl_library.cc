#include "kiln/dist/nccl/nccl_library.h"

#include <string>

#include "kiln/core/shared_library.h"

namespace kiln::dist {
namespace {

template <typename F>
void bind(void* library, const char* name, F& fn) {
  bind_symbol(library, "NCCL", name, fn);
}

// The soname of the major version kiln was compiled against, then the file CMake found.
Nccl load() {
  void* h = open_shared_library("NCCL", {"libnccl.so." + std::to_string(NCCL_MAJOR), KILN_NCCL_LIBRARY});
  Nccl n{};
  bind(h, "ncclGetUniqueId", n.GetUniqueId);
  bind(h, "ncclCommInitRank", n.CommInitRank);
  bind(h, "ncclCommDestroy", n.CommDestroy);
  bind(h, "ncclCommAbort", n.CommAbort);
  bind(h, "ncclCommGetAsyncError", n.CommGetAsyncError);
  bind(h, "ncclGetErrorString", n.GetErrorString);
  bind(h, "ncclAllReduce", n.AllReduce);
  bind(h, "ncclBroadcast", n.Broadcast);
  bind(h, "ncclAllGather", n.AllGather);
  bind(h, "ncclReduceScatter", n.ReduceScatter);
  bind(h, "ncclSend", n.Send);
  bind(h, "ncclRecv", n.Recv);
  bind(h, "ncclGroupStart", n.GroupStart);
  bind(h, "ncclGroupEnd", n.GroupEnd);
  bind(h, "ncclGetVersion", n.GetVersion);
  return n;
}

}  // namespace

const Nccl& nccl() {
  static const Nccl n = load();  // thread-safe; a failed load throws again on the next call
  return n;
}

}  // namespace kiln::dist
