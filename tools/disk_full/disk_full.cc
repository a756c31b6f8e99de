// tools/disk_full/disk_full.cc — libkiln_disk_full.so, an LD_PRELOAD library that makes a disk
// fill up: once the process has written KILN_DISK_FULL_AFTER bytes to files under the folder
// KILN_DISK_FULL_UNDER, every further write there fails with ENOSPC, as a full disk's would.
// tests/io/checkpoint_durability_test.cc saves a checkpoint onto it:
//   LD_PRELOAD=build/libkiln_disk_full.so KILN_DISK_FULL_UNDER=/tmp/ckpt KILN_DISK_FULL_AFTER=100000 kiln ...
#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::atomic<long long> g_written{0};

// Whether a write of `bytes` to `fd` finds the disk full (and counts it when it does not).
bool disk_full(int fd, size_t bytes) {
  const char* under = std::getenv("KILN_DISK_FULL_UNDER");
  const char* after = std::getenv("KILN_DISK_FULL_AFTER");
  if (!under || !*under || !after) return false;
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0 || std::string(path, size_t(n)).rfind(under, 0) != 0) return false;
  if (g_written.load() + (long long)bytes > std::atoll(after)) return true;
  g_written += (long long)bytes;
  return false;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* data, size_t bytes) {
  static const auto next = reinterpret_cast<ssize_t (*)(int, const void*, size_t)>(::dlsym(RTLD_NEXT, "write"));
  if (disk_full(fd, bytes)) {
    errno = ENOSPC;
    return -1;
  }
  return next(fd, data, bytes);
}

extern "C" ssize_t writev(int fd, const struct iovec* parts, int count) {
  static const auto next = reinterpret_cast<ssize_t (*)(int, const struct iovec*, int)>(::dlsym(RTLD_NEXT, "writev"));
  size_t bytes = 0;
  for (int i = 0; i < count; ++i) bytes += parts[i].iov_len;
  if (disk_full(fd, bytes)) {
    errno = ENOSPC;
    return -1;
  }
  return next(fd, parts, count);
}
