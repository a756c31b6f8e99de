// core/file_util.h — whole-file reads and crash-safe writes (temp name, fsync, rename).
#pragma once
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

namespace kiln {

// Reads a whole file; throws kiln::Error naming the path if it cannot.
std::string read_file(const std::filesystem::path& path);

// Writes `path` via `path.tmp.<pid>`: the callback fills the stream, the file is flushed and
// fsynced, renamed over `path`, and the parent directory fsynced. On any error the temp file is removed and the old file
// (if any) is untouched. Throws kiln::Error naming the path.
void write_file_atomic(const std::filesystem::path& path,
                       const std::function<void(std::ostream&)>& fill);

// fsync of a file or a directory (a directory's fsync makes renames inside it durable).
// Throws kiln::Error naming the path when the data cannot be made durable (disk full, I/O).
void fsync_path(const std::filesystem::path& path);

// Creates `dir` (and parents) and checks it is writable; throws kiln::Error naming it.
void ensure_writable_dir(const std::filesystem::path& dir);

}  // namespace kiln
