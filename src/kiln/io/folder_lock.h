// io/folder_lock.h — one kiln run per output folder. Where the filesystem has flock: an exclusive
// flock on DIR/.kiln.lock held for the object's lifetime (released by the kernel if the process
// dies). Where it refuses one (ENOLCK, ENOSYS, EOPNOTSUPP, EINVAL: some NFS, CephFS and Lustre
// mounts): DIR/.kiln.lock.held created exclusively (O_EXCL) and removed at the end; one left by a
// dead run on this host is taken over, one from another host has to be removed by hand. Either
// file holds the owner's pid and host, so a second run can say who has the folder. The lock file
// is never followed through a symbolic link.
#pragma once
#include <filesystem>
#include <string>

namespace kiln::io {

class FolderLock {
 public:
  // Creates `dir` if needed and locks it; throws kiln::Error saying which case it is: held by a
  // live run on this host, held from another host, or not lockable (and why).
  explicit FolderLock(const std::filesystem::path& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  // "" with flock; else what the run holds the folder with, for its start line.
  const std::string& fallback() const { return fallback_; }

 private:
  void hold_by_file(const std::filesystem::path& dir, int flock_errno);

  int fd_ = -1;
  std::filesystem::path held_file_;  // the O_EXCL fallback's file
  std::string fallback_;
};

}  // namespace kiln::io
