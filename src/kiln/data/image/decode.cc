// data/image/decode.cc — format sniffing and file reading.
#include "kiln/data/image/decode.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "kiln/core/error.h"

namespace kiln::data {

void decode_image(std::span<const uint8_t> bytes, const std::string& path, Image& out,
                  const MinDecodeSize& min_size) {
  KILN_CHECK(!bytes.empty(), "image {}: file is empty", path);
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) {
    decode_jpeg(bytes, path, out, min_size);
  } else if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) {
    decode_png(bytes, path, out);
    if (min_size) min_size({out.orig_height, out.orig_width});
  } else {
    throw Error("image {}: not a JPEG or PNG file (unrecognised first bytes)", path);
  }
}

void decode_image_file(const std::filesystem::path& path, std::vector<uint8_t>& buffer, Image& out,
                       const MinDecodeSize& min_size) {
  const std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  KILN_CHECK(file, "image {}: cannot open: {}", path.string(), std::strerror(errno));
  std::fseek(file.get(), 0, SEEK_END);
  const long size = std::ftell(file.get());
  std::fseek(file.get(), 0, SEEK_SET);
  KILN_CHECK(size >= 0, "image {}: cannot read size", path.string());
  buffer.resize(size_t(size));
  KILN_CHECK(std::fread(buffer.data(), 1, buffer.size(), file.get()) == buffer.size(),
             "image {}: read failed", path.string());
  decode_image(buffer, path.string(), out, min_size);
}

}  // namespace kiln::data
