#include "kiln/io/checkpoint_contents.h"

#include <fmt/format.h>
#include <zlib.h>

#include <fstream>
#include <vector>

#include "kiln/core/error.h"

namespace kiln::io {
namespace fs = std::filesystem;

namespace {

constexpr const char* kTensorFiles[] = {"model.safetensors", "optimizer.safetensors"};

nlohmann::json file_record(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("{}: cannot open to check its contents", file.string());
  std::vector<char> chunk(size_t(16) << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t bytes = 0;
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    const auto got = size_t(in.gcount());
    crc = crc32(crc, reinterpret_cast<const Bytef*>(chunk.data()), uInt(got));
    bytes += got;
  }
  if (in.bad()) throw Error("{}: read error while checking its contents", file.string());
  return {{"bytes", bytes}, {"crc32", fmt::format("{:08x}", uint32_t(crc))}};
}

}  // namespace

nlohmann::json checkpoint_contents(const fs::path& checkpoint) {
  nlohmann::json contents = nlohmann::json::object();
  for (const char* name : kTensorFiles)
    if (fs::exists(checkpoint / name)) contents[name] = file_record(checkpoint / name);
  return contents;
}

std::string contents_difference(const nlohmann::json& recorded, const nlohmann::json& actual) {
  for (const auto& [name, want] : recorded.items()) {
    if (!actual.contains(name)) return fmt::format("{} is missing", name);
    const nlohmann::json& got = actual.at(name);
    for (const char* field : {"bytes", "crc32"})
      if (got.value(field, nlohmann::json()) != want.value(field, nlohmann::json()))
        return fmt::format("{} has {} {}, meta.json records {}", name, field, got.at(field).dump(),
                           want.value(field, nlohmann::json()).dump());
  }
  return "";
}

std::string describe_contents(const nlohmann::json& contents) {
  std::string out;
  for (const auto& [name, record] : contents.items())
    out += fmt::format("{}{} {} bytes crc32 {}", out.empty() ? "" : ", ", name, record.at("bytes").dump(),
                       record.at("crc32").get<std::string>());
  return out;
}

}  // namespace kiln::io
