// tests/testing/cuda_device.h — whether this machine has a usable CUDA device (`kiln devices`
// lists cuda:0), for tests that run only on a GPU or only without one.
#pragma once
#include <string>

#include "kiln/backend/devices.h"

namespace kiln::testing {

inline bool cuda_device_present() {
  for (const std::string& line : device_lines())
    if (line.starts_with("cuda:0:")) return true;
  return false;
}

}  // namespace kiln::testing
