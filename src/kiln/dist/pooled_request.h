// dist/pooled_request.h — class-level operator new / delete that keep a request type's freed
// blocks for the next one. Communicator::isend / irecv return each request on the heap
// (std::unique_ptr<Request>), and a pipeline step makes a few per micro-batch: reusing their
// memory keeps the steady-state step free of allocations. `delete` through a Request* reaches
// the derived class's operator delete because Request's destructor is virtual. The blocks are kept
// for the process (at most as many as were ever in flight at once).
#pragma once
#include <cstddef>
#include <mutex>
#include <new>

namespace kiln::dist {

template <typename T>
class PooledRequest {
 public:
  static void* operator new(std::size_t bytes) {
    if (bytes == sizeof(T)) {
      const std::lock_guard lock(mutex_);
      if (FreeBlock* block = free_) {
        free_ = block->next;
        return block;
      }
    }
    return ::operator new(bytes);
  }

  static void operator delete(void* p, std::size_t bytes) {
    if (bytes != sizeof(T)) return ::operator delete(p);
    const std::lock_guard lock(mutex_);
    free_ = new (p) FreeBlock{free_};
  }

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  static_assert(sizeof(FreeBlock) <= sizeof(void*));
  static inline std::mutex mutex_;
  static inline FreeBlock* free_ = nullptr;
};

}  // namespace kiln::dist
