// tests/testing/loopback_server.h — tests/testing/range_http_server.py on 127.0.0.1 for the
// download script tests: serves a folder (with Range, as curl -C - needs), cutting the first
// response for each file named in `cut`; stopped when the object goes.
#pragma once
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <string>

#include "kiln/core/file_util.h"
#include "tests/testing/run_command.h"

namespace kiln::testing {

class LoopbackServer {
 public:
  LoopbackServer(const std::filesystem::path& root, const std::string& cut) {
    const std::filesystem::path port_file = root.parent_path() / "port";
    std::filesystem::remove(port_file);
    const auto [rc, pid] = run_command("/usr/bin/python3 '" + std::string(KILN_SOURCE_DIR) +
                                       "/tests/testing/range_http_server.py' '" + root.string() + "' '" + cut +
                                       "' > '" + port_file.string() + "' 2>/dev/null & echo $!");
    pid_ = std::stoi(pid);
    for (int i = 0; i < 100 && read_or_empty(port_file).empty(); ++i) ::usleep(50000);
    url_ = "http://127.0.0.1:" + read_or_empty(port_file).substr(0, 5);
    while (!url_.empty() && !std::isdigit(static_cast<unsigned char>(url_.back()))) url_.pop_back();
  }
  ~LoopbackServer() { ::kill(pid_, SIGTERM); }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;
  const std::string& url() const { return url_; }

 private:
  static std::string read_or_empty(const std::filesystem::path& p) {
    return std::filesystem::exists(p) ? read_file(p) : "";
  }
  int pid_;
  std::string url_;
};

// The md5 of a file, as md5sum prints it.
inline std::string md5_of(const std::filesystem::path& path) {
  return run_command("md5sum '" + path.string() + "'").second.substr(0, 32);
}

}  // namespace kiln::testing
