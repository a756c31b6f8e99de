#include "kiln/dist/nccl/nccl_library.h"

#include <dlfcn.h>

#include <string>

#include "kiln/core/error.h"

namespace kiln::dist {
namespace {

void* open_library() {
  const std::string soname = "libnccl.so." + std::to_string(NCCL_MAJOR);
  if (void* h = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  if (void* h = ::dlopen(KILN_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL)) return h;
  throw Error("NCCL: cannot open {} (nor {}): {}", soname, KILN_NCCL_LIBRARY, ::dlerror());
}

template <typename F>
void bind(void* library, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(library, name));
  if (!fn) throw Error("NCCL: the library has no {}", name);
}

Nccl load() {
  void* h = open_library();
  Nccl n{};
  bind(h, "ncclGetUniqueId", n.GetUniqueId);
  bind(h, "ncclCommInitRank", n.CommInitRank);
  bind(h, "ncclCommDestroy", n.CommDestroy);
  bind(h, "ncclGetErrorString", n.GetErrorString);
  bind(h, "ncclAllReduce", n.AllReduce);
  bind(h, "ncclBroadcast", n.Broadcast);
  bind(h, "ncclAllGather", n.AllGather);
  bind(h, "ncclReduceScatter", n.ReduceScatter);
  bind(h, "ncclSend", n.Send);
  bind(h, "ncclRecv", n.Recv);
  bind(h, "ncclGroupStart", n.GroupStart);
  bind(h, "ncclGroupEnd", n.GroupEnd);
  return n;
}

}  // namespace

const Nccl& nccl() {
  static const Nccl n = load();  // thread-safe; a failed load throws again on the next call
  return n;
}

}  // namespace kiln::dist
