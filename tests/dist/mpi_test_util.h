// tests/dist/mpi_test_util.h — starting kiln under mpirun from a test.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

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

}  // namespace kiln::testing
