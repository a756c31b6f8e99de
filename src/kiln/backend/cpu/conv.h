// backend/cpu/conv.h — internal switches of the CPU convolutions, for tests.
#pragma once
#include <cstdint>

namespace kiln::ops::cpu {

// The scratch a weight gradient's gathered windows may take before they are gathered a few
// images at a time (one image at least); 64 MiB by default, 0 restores that.
void set_window_scratch_bytes(int64_t bytes);

}  // namespace kiln::ops::cpu
