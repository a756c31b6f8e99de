// io/sstable.h — a reader of LevelDB's immutable table format, which TensorFlow uses for the
// `.index` file of a TensorBundle checkpoint.
//
// File: data blocks, a metaindex block, an index block, then a 48-byte footer: the metaindex
// and index BlockHandles (varint64 offset, varint64 size), zero padding to 40 bytes, and the
// magic 0xdb4775248b80fb57 (fixed64, little-endian).
// Block: entries, each varint32 shared-prefix length, varint32 unshared length, varint32 value
// length, the unshared key bytes, the value; then fixed32 restart offsets (entries that store
// their whole key) and their fixed32 count. On disk each block is followed by a 5-byte trailer:
// the compression type (0: none) and the masked CRC-32C of the block and that type byte.
// The index block maps a key >= the last key of each data block to that block's handle.
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace kiln::io {

// Every (key, value) of the table at `path`, in key order. Throws kiln::Error naming the file for
// a bad footer or magic, a block out of range, a checksum mismatch, a compressed block, a
// malformed entry, keys out of order, or keys and values that expand (by shared prefixes) to
// more than 64 times the file's size.
std::vector<std::pair<std::string, std::string>> read_sstable(const std::filesystem::path& path);

}  // namespace kiln::io
