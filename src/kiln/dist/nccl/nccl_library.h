// dist/nccl/nccl_library.h — NCCL, opened on first use (dlopen) instead of linked: the library
// is large, and a process that never reduces device tensors across GPUs should not load it.
#pragma once
#include <nccl.h>

namespace kiln::dist {

// The NCCL functions kiln calls.
struct Nccl {
  decltype(&ncclGetUniqueId) GetUniqueId;
  decltype(&ncclCommInitRank) CommInitRank;
  decltype(&ncclCommDestroy) CommDestroy;
  decltype(&ncclCommAbort) CommAbort;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&ncclGetErrorString) GetErrorString;
  decltype(&ncclAllReduce) AllReduce;
  decltype(&ncclBroadcast) Broadcast;
  decltype(&ncclAllGather) AllGather;
  decltype(&ncclReduceScatter) ReduceScatter;
  decltype(&ncclSend) Send;
  decltype(&ncclRecv) Recv;
  decltype(&ncclGroupStart) GroupStart;
  decltype(&ncclGroupEnd) GroupEnd;
  decltype(&ncclGetVersion) GetVersion;
};

// The library kiln was built against (its soname, then the file CMake found), opened once;
// throws naming the file (or the missing function) when it cannot be opened.
const Nccl& nccl();

}  // namespace kiln::dist
