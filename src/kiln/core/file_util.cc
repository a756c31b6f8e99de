#include "kiln/core/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/core/error.h"

namespace kiln {
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("{}: cannot open: {}", path.string(), std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("{}: read failed", path.string());
  return ss.str();
}

void write_file_atomic(const fs::path& path, const std::function<void(std::ostream&)>& fill) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(getpid());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw Error("{}: cannot write: {}", path.string(), std::strerror(errno));
      fill(out);
      out.flush();
      if (!out) throw Error("{}: write failed (disk full?)", path.string());
    }
    fsync_path(tmp);
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw Error("{}: cannot rename from temp file: {}", path.string(), ec.message());
    fsync_path(path.has_parent_path() ? path.parent_path() : fs::path("."));
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("{}: cannot open to sync: {}", path.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw Error("{}: cannot sync to disk: {}", path.string(), std::strerror(err));
}

void ensure_writable_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("{}: cannot create directory: {}", dir.string(), ec.message());
  if (::access(dir.c_str(), W_OK) != 0)
    throw Error("{}: directory is not writable: {}", dir.string(), std::strerror(errno));
}

}  // namespace kiln
