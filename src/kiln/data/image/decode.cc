// data/image/decode.cc — format sniffing and file reading.
#include "kiln/data/image/decode.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "kiln/core/error.h"

namespace kiln::data {

namespace {

constexpr int64_t kDefaultMaxImagePixels = 89478485;

int64_t max_pixels_from_env() {
  const char* env = std::getenv("KILN_MAX_IMAGE_PIXELS");
  if (!env || !*env) return kDefaultMaxImagePixels;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  KILN_CHECK(*end == '\0' && v > 0, "KILN_MAX_IMAGE_PIXELS: expected a positive integer, got '{}'", env);
  return v;
}

std::atomic<int64_t> g_max_pixels{0};  // 0: not read from the environment yet

}  // namespace

int64_t max_image_pixels() {
  int64_t v = g_max_pixels.load();
  if (v == 0) {
    v = max_pixels_from_env();
    g_max_pixels.store(v);
  }
  return v;
}

void set_max_image_pixels(int64_t pixels) {
  KILN_CHECK(pixels > 0, "maximum image size {} pixels must be positive", pixels);
  g_max_pixels.store(pixels);
}

void throw_too_large(const std::string& path, ImageSize stored) {
  throw Error("image {}: {} x {} pixels exceeds the limit of {} pixels (KILN_MAX_IMAGE_PIXELS)",
              path, stored.width, stored.height, max_image_pixels());
}

void decode_image(std::span<const uint8_t> bytes, const std::string& path, Image& out,
                  const MinDecodeSize& min_size) {
  try {
    decode_known_format(bytes, path, out, min_size);
  } catch (const std::bad_alloc&) {
    throw Error("image {}: out of memory while decoding", path);
  }
}

void decode_known_format(std::span<const uint8_t> bytes, const std::string& path, Image& out,
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
