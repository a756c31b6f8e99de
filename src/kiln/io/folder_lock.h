// io/folder_lock.h — one kiln run per output folder: an exclusive flock on DIR/.kiln.lock held
// for the object's lifetime (released by the kernel if the process dies). The file holds the
// owner's pid and host, so a second run can say who has the folder.
#pragma once
#include <filesystem>

namespace kiln::io {

class FolderLock {
 public:
  // Creates `dir` if needed and locks it; throws kiln::Error naming the holder's pid and host
  // when another process holds the lock.
  explicit FolderLock(const std::filesystem::path& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace kiln::io
