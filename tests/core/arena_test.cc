#include "kiln/core/arena.h"

#include <gtest/gtest.h>

#include "kiln/core/allocator.h"
#include "kiln/core/context.h"
#include "kiln/core/error.h"

namespace kiln {
namespace {

// Two steps that ask for the same shapes in the same order.
std::vector<void*> one_step(Arena& arena) {
  std::vector<void*> addresses;
  for (int64_t n : {1000, 300000, 7, 600000, 64})
    addresses.push_back(arena.alloc({n}, DType::f32).data);
  arena.reset();
  return addresses;
}

TEST(Arena, AddressesAreStableAndNothingIsAllocatedAfterTheFirstStep) {
  Arena arena;
  one_step(arena);  // first step: grows block by block
  const std::vector<void*> second = one_step(arena);
  const int64_t allocations = allocation_count();
  for (int step = 0; step < 3; ++step) EXPECT_EQ(one_step(arena), second);
  EXPECT_EQ(allocation_count(), allocations);
  EXPECT_EQ(arena.capacity(), arena.high_water());
}

// A reservation that covers the first step's high-water mark: one block from the start, the same
// addresses in every step, and nothing allocated after the reservation.
TEST(Arena, AReservationCoveringTheFirstStepIsTheOnlyBlock) {
  Arena arena;
  arena.reserve(4000000);
  EXPECT_EQ(arena.block_allocations(), 1);
  const std::vector<void*> first = one_step(arena);
  EXPECT_EQ(arena.block_allocations(), 1);
  EXPECT_EQ(one_step(arena), first);
  EXPECT_EQ(arena.capacity(), 4000000u);
  Arena unreserved;
  one_step(unreserved);
  EXPECT_GT(unreserved.block_allocations(), 2);  // block after block, then folded
  EXPECT_THROW(
      {
        (void)arena.alloc({1}, DType::f32);
        arena.reserve(8000000);
      },
      Error);
}

TEST(Arena, HandsOutAlignedNonOverlappingTensors) {
  Arena arena;
  Tensor a = arena.alloc({3, 5}, DType::bf16), b = arena.alloc({17}, DType::f32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 64, 0u);
  EXPECT_GE(static_cast<std::byte*>(b.data) - static_cast<std::byte*>(a.data), int64_t(a.nbytes()));
  EXPECT_EQ(a.dtype, DType::bf16);
  EXPECT_EQ(arena.in_use(), 64u + 128u);
}

// An op's own scratch (ScratchScope) is handed out again to the next op, across blocks too (the
// first step), and the high-water mark keeps what the op needed.
TEST(Arena, ScratchScopeFreesAnOpsOwnScratch) {
  Arena arena;
  Context ctx;
  ctx.scratch = &arena;
  const Tensor kept = arena.alloc({100}, DType::f32);
  void* first = nullptr;
  {
    const ScratchScope scope(ctx);
    first = ctx.scratch_tensor({500000}, DType::f32).data;  // beyond the first 1 MiB block
    (void)ctx.scratch_tensor({10}, DType::f32);
  }
  EXPECT_EQ(arena.in_use(), 448u);
  const int64_t blocks = arena.block_allocations();
  EXPECT_EQ(ctx.scratch_tensor({500000}, DType::f32).data, first);  // the released block again
  EXPECT_EQ(arena.block_allocations(), blocks);
  EXPECT_GE(arena.high_water(), 448u + 2000000u);
  EXPECT_NE(kept.data, first);
}

TEST(Allocator, DeviceWithoutBackendIsAClearError) {
  EXPECT_THROW(Tensor::empty({4}, DType::f32, Device::cuda(0)), Error);
}

}  // namespace
}  // namespace kiln
