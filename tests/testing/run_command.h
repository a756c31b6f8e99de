// tests/testing/run_command.h — run a shell command from a test and capture what it prints.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>

namespace kiln::testing {

enum class Capture { combined, stderr_only };  // stdout+stderr, or stderr with stdout discarded

// Runs `command` with /bin/sh; returns {exit status, captured output}.
inline std::pair<int, std::string> run_command(const std::string& command, Capture capture = Capture::combined) {
  const std::string shell =
      capture == Capture::combined ? command + " 2>&1" : "{ " + command + "; } 2>&1 >/dev/null";
  FILE* pipe = ::popen(shell.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  return {WEXITSTATUS(::pclose(pipe)), out};
}

}  // namespace kiln::testing
