// tools/fs_trace/fs_trace.cc — libkiln_fs_trace.so, an LD_PRELOAD library that appends every
// fsync, rename and renameat2 a process makes to $KILN_FS_TRACE, one line each, in the order
// they happened: "fsync PATH", "rename FROM TO", "renameat2 FROM TO" (paths as given, an fsync's
// from /proc/self/fd). tests/io/checkpoint_durability_test.cc reads a checkpoint save's trace to
// check that every file and folder is fsynced before it is published and the pointer file last:
//   LD_PRELOAD=build/libkiln_fs_trace.so KILN_FS_TRACE=/tmp/trace.txt kiln train ... --save ckpt
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

void trace(const std::string& line) {
  const char* file = std::getenv("KILN_FS_TRACE");
  if (!file || !*file) return;
  const int fd = ::open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  [[maybe_unused]] const ssize_t n = ::write(fd, text.data(), text.size());  // one append: whole lines
  ::close(fd);
}

std::string fd_path(int fd) {
  char link[64], path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  return n > 0 ? std::string(path, size_t(n)) : "?";
}

}  // namespace

extern "C" int fsync(int fd) {
  static const auto next = real<int (*)(int)>("fsync");
  trace("fsync " + fd_path(fd));
  return next(fd);
}

extern "C" int rename(const char* from, const char* to) {
  static const auto next = real<int (*)(const char*, const char*)>("rename");
  trace(std::string("rename ") + from + " " + to);
  return next(from, to);
}

extern "C" int renameat2(int from_dir, const char* from, int to_dir, const char* to, unsigned flags) {
  static const auto next = real<int (*)(int, const char*, int, const char*, unsigned)>("renameat2");
  trace(std::string("renameat2 ") + from + " " + to);
  return next(from_dir, from, to_dir, to, flags);
}
