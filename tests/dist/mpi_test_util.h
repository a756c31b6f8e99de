// tests/dist/mpi_test_util.h — starting kiln under mpirun from a test.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/io/safetensors.h"

namespace kiln::testing {

// Empty when this machine can run kiln under mpirun; else why not (the test skips saying so).
inline std::string mpi_missing() {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return "mpirun not found: install openmpi-bin";
#ifndef KILN_TEST_MPI
  return "kiln was built without MPI: install libopenmpi-dev and reconfigure";
#endif
  return "";
}

// `env ENV mpirun -np N ...` passing every variable of `env` ("A=1 B=2") to the ranks.
inline std::string mpirun(int processes, const std::string& env) {
  std::string forward;
  for (size_t at = 0; at < env.size();) {
    const size_t end = std::min(env.find(' ', at), env.size());
    forward += " -x " + env.substr(at, env.find('=', at) - at);
    at = end + 1;
  }
  return "env " + env + " mpirun -np " + std::to_string(processes) + " --oversubscribe --bind-to none" +
         (::geteuid() == 0 ? " --allow-run-as-root" : "") + forward;
}

// The (step, loss) lines that KILN_TEST_LOSS_LOG makes rank 0 write (train/test_hooks.h), in
// order; none when the file is missing.
inline std::vector<std::pair<int, double>> read_loss_log(const std::filesystem::path& file) {
  std::vector<std::pair<int, double>> losses;
  std::ifstream log(file);
  for (std::string step, loss; log >> step >> loss;) losses.emplace_back(std::stoi(step), std::strtod(loss.c_str(), nullptr));
  return losses;
}

// The losses of read_loss_log alone.
inline std::vector<double> read_losses(const std::filesystem::path& file) {
  std::vector<double> losses;
  for (const auto& entry : read_loss_log(file)) losses.push_back(entry.second);
  return losses;
}

// The largest difference between same-named tensors of two safetensors files (a checkpoint's
// model or optimizer file), relative to the value where it exceeds 1 (a BN running variance of a
// thousand is a few ulp off when its weights are); the names must match.
inline double largest_difference(const std::filesystem::path& a_file, const std::filesystem::path& b_file) {
  const io::SafetensorsFile a = io::SafetensorsFile::open(a_file), b = io::SafetensorsFile::open(b_file);
  EXPECT_EQ(a.names(), b.names());
  double largest = 0;
  for (const std::string& name : a.names()) {
    const std::vector<float> x = to_float_vector(a.get(name)), y = to_float_vector(b.get(name));
    EXPECT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
      largest = std::max(largest, std::abs(double(x[i]) - y[i]) / std::max(1.0, std::abs(double(x[i]))));
  }
  return largest;
}

}  // namespace kiln::testing
