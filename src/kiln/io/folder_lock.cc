#include "kiln/io/folder_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kiln/core/error.h"
#include "kiln/core/file_util.h"

namespace kiln::io {
namespace fs = std::filesystem;

namespace {

std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

std::string owner_line() { return fmt::format("pid {} on host {}\n", ::getpid(), this_host()); }

struct Owner {
  long pid = 0;
  std::string host;
};

// "pid N on host H" as the holder wrote it; pid 0 when the file says something else.
Owner read_owner(int fd) {
  char text[256] = {};
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  Owner o;
  char host[200] = {};
  if (n > 0 && std::sscanf(text, "pid %ld on host %199s", &o.pid, host) == 2) o.host = host;
  return o;
}

bool alive_here(const Owner& o) { return o.pid > 0 && (::kill(pid_t(o.pid), 0) == 0 || errno == EPERM); }

[[noreturn]] void refuse_held(const fs::path& dir, const Owner& o) {
  if (o.pid == 0) throw Error("{}: in use by another kiln run (its lock file names no owner); use another --save directory", dir.string());
  if (o.host == this_host())
    throw Error("{}: in use by a live kiln run on this host (pid {}); use another --save directory or stop that run",
                dir.string(), o.pid);
  throw Error("{}: in use by a kiln run on host {} (pid {}); use another --save directory or stop that run",
              dir.string(), o.host, o.pid);
}

// The flock errors that mean "this filesystem does not lock", not "someone holds it".
bool locking_unsupported(int e) { return e == ENOLCK || e == ENOSYS || e == EOPNOTSUPP || e == EINVAL; }

// KILN_TEST_NO_FLOCK=1 (test hook): flock fails with ENOLCK, as on a mount without locks.
bool flock_disabled_for_test() {
  const char* v = std::getenv("KILN_TEST_NO_FLOCK");
  return v && std::string(v) == "1";
}

int open_no_follow(const fs::path& file, int flags) {
  const int fd = ::open(file.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 && errno == ELOOP)
    throw Error("{}: is a symbolic link; kiln does not follow its lock file through one", file.string());
  return fd;
}

}  // namespace

FolderLock::FolderLock(const fs::path& dir) {
  ensure_writable_dir(dir);
  const fs::path file = dir / ".kiln.lock";
  fd_ = open_no_follow(file, O_RDWR | O_CREAT);
  if (fd_ < 0) throw Error("{}: cannot open lock file: {}", file.string(), std::strerror(errno));
  const int rc = flock_disabled_for_test() ? (errno = ENOLCK, -1) : ::flock(fd_, LOCK_EX | LOCK_NB);
  if (rc != 0) {
    const int e = errno;
    const Owner o = read_owner(fd_);
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK) refuse_held(dir, o);
    if (!locking_unsupported(e)) throw Error("{}: cannot lock: {}", file.string(), std::strerror(e));
    hold_by_file(dir, e);
    return;
  }
  const std::string owner = owner_line();
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, owner.data(), owner.size(), 0) < 0)
    throw Error("{}: cannot write lock file: {}", file.string(), std::strerror(errno));
}

// Without flock: the folder is held by creating .kiln.lock.held exclusively.
void FolderLock::hold_by_file(const fs::path& dir, int flock_errno) {
  const fs::path held = dir / ".kiln.lock.held";
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = open_no_follow(held, O_RDWR | O_CREAT | O_EXCL);
    if (fd >= 0) {
      const std::string owner = owner_line();
      const bool written = ::pwrite(fd, owner.data(), owner.size(), 0) == ssize_t(owner.size()) && ::fsync(fd) == 0;
      ::close(fd);
      if (!written) throw Error("{}: cannot write lock file: {}", held.string(), std::strerror(errno));
      held_file_ = held;
      fallback_ = fmt::format("{} has no flock ({}): the folder is held by {}", dir.string(),
                              std::strerror(flock_errno), held.string());
      return;
    }
    if (errno != EEXIST) throw Error("{}: cannot create lock file: {}", held.string(), std::strerror(errno));
    const int existing = open_no_follow(held, O_RDONLY);
    const Owner o = existing >= 0 ? read_owner(existing) : Owner{};
    if (existing >= 0) ::close(existing);
    if (o.pid == 0 || o.host != this_host() || alive_here(o)) refuse_held(dir, o);
    fs::remove(held);  // left by a run of this host that is gone
  }
  throw Error("{}: could not take the folder (another run took it meanwhile)", dir.string());
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
  if (!held_file_.empty()) ::unlink(held_file_.c_str());
}

}  // namespace kiln::io
