#include "kiln/io/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"

namespace kiln::io {

FolderLock::FolderLock(const std::filesystem::path& dir) {
  ensure_writable_dir(dir);
  const std::filesystem::path file = dir / ".kiln.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("{}: cannot open lock file: {}", file.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char owner[256] = {};
    const ssize_t n = ::pread(fd_, owner, sizeof(owner) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string who = n > 0 ? std::string(owner, size_t(n)) : "another process";
    while (!who.empty() && who.back() == '\n') who.pop_back();
    throw Error("{}: in use by another kiln run ({}); use another --save directory or stop that run",
                dir.string(), who);
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string owner = "pid " + std::to_string(::getpid()) + " on host " + host + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, owner.data(), owner.size(), 0) < 0)
    throw Error("{}: cannot write lock file: {}", file.string(), std::strerror(errno));
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace kiln::io
