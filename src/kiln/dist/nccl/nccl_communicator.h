// dist/nccl/nccl_communicator.h — collectives over tensors on the GPU of each process, through
// NCCL (built where CMake finds nccl.h beside the CUDA toolkit: KILN_HAVE_NCCL). The NCCL
// communicator is made over a host communicator: rank 0 draws NCCL's unique id and the host
// communicator broadcasts it. Device collectives are queued on the GPU's op stream, ordered with
// the ops; iall_reduce_sum runs on a stream of its own, so backward goes on while a gradient
// bucket is reduced. Host tensors (losses, counters) go to the host communicator.
// Departure from dist/communicator.h: NCCL adds in the order of its rings and trees, not in rank
// order. The result is the same on every rank and from run to run on the same machines, but not
// bitwise what the MPI communicator (or the staged one) gives.
#pragma once
#include <memory>

#include "kiln/core/device.h"
#include "kiln/dist/communicator.h"

namespace kiln::dist {

// Collective over `host`: every rank passes its own CUDA device.
std::unique_ptr<Communicator> nccl_communicator(Communicator& host, Device device);

}  // namespace kiln::dist
