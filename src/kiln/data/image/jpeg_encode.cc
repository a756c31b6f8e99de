// data/image/jpeg_encode.cc — libjpeg encoding (used by `kiln images from-idx` and tests).
#include "kiln/data/image/jpeg_encode.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <jpeglib.h>

#include "kiln/core/error.h"
#include "kiln/data/image/jpeg_error.h"

namespace kiln::data {
namespace {

bool run_compress(jpeg_compress_struct* cinfo, JpegErrorManager* err, const uint8_t* pixels, int height,
                  int width, int channels, int quality, unsigned char** data, unsigned long* size) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_dest(cinfo, data, size);
  cinfo->image_width = JDIMENSION(width);
  cinfo->image_height = JDIMENSION(height);
  cinfo->input_components = channels;
  cinfo->in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, quality, TRUE);
  jpeg_start_compress(cinfo, TRUE);
  while (cinfo->next_scanline < cinfo->image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels) + size_t(cinfo->next_scanline) * width * channels;
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  return true;
}

}  // namespace

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int height, int width, int channels,
                                 int quality) {
  KILN_CHECK(channels == 1 || channels == 3, "encode_jpeg: {} channels (need 1 or 3)", channels);
  jpeg_compress_struct cinfo;
  JpegErrorManager err;
  cinfo.err = jpeg_error_init(err);
  jpeg_create_compress(&cinfo);
  unsigned char* data = nullptr;
  unsigned long size = 0;
  const bool ok = run_compress(&cinfo, &err, pixels, height, width, channels, quality, &data, &size);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> bytes;
  if (ok) bytes.assign(data, data + size);
  std::free(data);
  if (!ok) throw Error("JPEG encode ({}x{}): {}", width, height, err.message);
  return bytes;
}

void write_jpeg(const std::filesystem::path& path, const uint8_t* pixels, int height, int width,
                int channels, int quality) {
  const std::vector<uint8_t> bytes = encode_jpeg(pixels, height, width, channels, quality);
  FILE* file = std::fopen(path.c_str(), "wb");
  KILN_CHECK(file, "cannot create {}", path.string());
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  KILN_CHECK(std::fclose(file) == 0 && ok, "cannot write {}", path.string());
}

}  // namespace kiln::data
