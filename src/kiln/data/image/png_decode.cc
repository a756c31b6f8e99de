// data/image/png_decode.cc — libpng decoding to 8-bit RGB (alpha dropped as PIL's convert("RGB")).
#include <png.h>

#include <csetjmp>
#include <cstring>

#include "kiln/core/error.h"
#include "kiln/data/image/decode.h"

namespace kiln::data {
namespace {

struct PngSource {
  std::span<const uint8_t> bytes;
  size_t offset = 0;
  char message[256] = {};
};

void on_error(png_structp png, png_const_charp message) {
  auto* source = static_cast<PngSource*>(png_get_error_ptr(png));
  std::strncpy(source->message, message, sizeof source->message - 1);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

void read_bytes(png_structp png, png_bytep data, png_size_t length) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (source->bytes.size() - source->offset < length) png_error(png, "file is truncated");
  std::memcpy(data, source->bytes.data() + source->offset, length);
  source->offset += length;
}

// Only plain data and pointers cross the setjmp (see jpeg_decode.cc).
bool run_read(png_structp png, png_infop info, Image* out, std::vector<png_bytep>* rows,
              bool* too_large) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  out->orig_height = int(png_get_image_height(png, info));
  out->orig_width = int(png_get_image_width(png, info));
  *too_large = int64_t(out->orig_height) * out->orig_width > max_image_pixels();
  if (*too_large) return false;
  const int color = png_get_color_type(png, info);
  png_set_expand(png);  // palette -> RGB, gray < 8 bit -> 8 bit, tRNS -> alpha
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->height = out->orig_height = int(png_get_image_height(png, info));
  out->width = out->orig_width = int(png_get_image_width(png, info));
  if (png_get_rowbytes(png, info) != size_t(out->width) * 3) png_error(png, "unsupported pixel layout");
  out->pixels.resize(size_t(out->height) * out->width * 3);
  rows->resize(size_t(out->height));
  for (int y = 0; y < out->height; ++y) (*rows)[y] = out->pixels.data() + size_t(y) * out->width * 3;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  return true;
}

}  // namespace

void decode_png(std::span<const uint8_t> bytes, const std::string& path, Image& out) {
  PngSource source{bytes};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &source, on_error, on_warning);
  KILN_CHECK(png, "image {}: PNG: out of memory", path);
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw Error("image {}: PNG: out of memory", path);
  }
  png_set_read_fn(png, &source, read_bytes);
  thread_local std::vector<png_bytep> rows;
  bool too_large = false;
  const bool ok = run_read(png, info, &out, &rows, &too_large);
  png_destroy_read_struct(&png, &info, nullptr);
  if (too_large) throw_too_large(path, {out.orig_height, out.orig_width});
  if (!ok) throw Error("image {}: PNG: {}", path, source.message);
}

}  // namespace kiln::data
