#include "kiln/core/notice.h"

#include <cstdio>
#include <string>

namespace kiln {
namespace {

std::string& prefix() {
  static std::string p = "kiln: ";
  return p;
}

}  // namespace

void set_notice_rank(int rank, int ranks) { prefix() = ranks > 1 ? fmt::format("kiln: rank {}: ", rank) : "kiln: "; }

void notice_line(std::string_view text) {
  const std::string line = prefix() + std::string(text) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: ranks sharing a terminal do not interleave
  std::fflush(stderr);
}

}  // namespace kiln
