// io/checkpoint_contents.h — what identifies a checkpoint's contents: the size and CRC-32 (zlib)
// of each of its tensor files. CheckpointManager::save records it in meta.json under "contents";
// a resume recomputes it on every rank (train/resume.h), so that all ranks confirm they load the
// same bytes and a damaged file is named before anything trains on it.
//   "contents": {"model.safetensors": {"bytes": 1234, "crc32": "89abcdef"}, "optimizer.safetensors": {...}}
// Reading the files costs about a second per GB here; a resume reads them anyway.
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace kiln::io {

// The contents record of the tensor files in `checkpoint` (those present).
nlohmann::json checkpoint_contents(const std::filesystem::path& checkpoint);

// "" when `actual` (checkpoint_contents) matches what `recorded` (meta.json's "contents") says;
// else the first difference, e.g. "model.safetensors has crc32 01234567, meta.json records 89abcdef".
std::string contents_difference(const nlohmann::json& recorded, const nlohmann::json& actual);

// "model.safetensors 1234 bytes crc32 89abcdef, optimizer.safetensors ..." (for messages).
std::string describe_contents(const nlohmann::json& contents);

}  // namespace kiln::io
