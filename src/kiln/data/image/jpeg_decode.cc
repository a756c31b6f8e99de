// data/image/jpeg_decode.cc — libjpeg-turbo decoding with DCT-domain downscaling.
#include <csetjmp>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "kiln/core/error.h"
#include "kiln/data/image/decode.h"
#include "kiln/data/image/jpeg_error.h"

namespace kiln::data {
namespace {

// A truncated file makes libjpeg warn and pad the image with gray; such warnings are errors
// here. Other warnings (e.g. extraneous bytes before a marker) leave a correct image.
void on_message(j_common_ptr cinfo, int level) {
  const int code = cinfo->err->msg_code;
  if (level < 0 && (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER)) jpeg_error_exit(cinfo);
}

// CMYK to RGB as PIL and ImageMagick do; Adobe files store the inks inverted.
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int width, bool inverted) {
  for (int x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    const int k = inverted ? cmyk[3] : 255 - cmyk[3];
    for (int c = 0; c < 3; ++c) {
      const int ink = inverted ? cmyk[c] : 255 - cmyk[c];
      rgb[c] = uint8_t((ink * k + 127) / 255);
    }
  }
}

// All libjpeg calls live here: nothing with a destructor is created between setjmp and a
// longjmp, and only memory reached through pointers is used after returning false.
bool run_decompress(jpeg_decompress_struct* cinfo, JpegErrorManager* err, std::span<const uint8_t> bytes,
                    Image* out, const MinDecodeSize* min_size, std::vector<uint8_t>* cmyk_row,
                    bool* too_large) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  const ImageSize stored{int(cinfo->image_height), int(cinfo->image_width)};
  *too_large = int64_t(stored.height) * stored.width > max_image_pixels();
  if (*too_large) return false;
  out->orig_height = stored.height;
  out->orig_width = stored.width;
  if (*min_size) {
    cinfo->scale_num = unsigned(jpeg_scale_numerator(stored, (*min_size)(stored)));
    cinfo->scale_denom = 8;
  }
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(cinfo);
  out->height = int(cinfo->output_height);
  out->width = int(cinfo->output_width);
  out->pixels.resize(size_t(out->height) * out->width * 3);
  if (cmyk) cmyk_row->resize(size_t(out->width) * 4);
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* row = out->pixels.data() + size_t(cinfo->output_scanline) * out->width * 3;
    JSAMPROW target = cmyk ? cmyk_row->data() : row;
    jpeg_read_scanlines(cinfo, &target, 1);
    if (cmyk) cmyk_to_rgb(cmyk_row->data(), row, out->width, cinfo->saw_Adobe_marker);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace

int jpeg_scale_numerator(ImageSize stored, ImageSize min) {
  for (int n = 1; n < 8; ++n) {
    // libjpeg rounds scaled sizes up.
    const int64_t h = (int64_t(stored.height) * n + 7) / 8, w = (int64_t(stored.width) * n + 7) / 8;
    if (h >= min.height && w >= min.width) return n;
  }
  return 8;
}

void decode_jpeg(std::span<const uint8_t> bytes, const std::string& path, Image& out,
                 const MinDecodeSize& min_size) {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  cinfo.err = jpeg_error_init(err);
  err.mgr.emit_message = on_message;
  jpeg_create_decompress(&cinfo);
  thread_local std::vector<uint8_t> cmyk_row;
  bool too_large = false;
  const bool ok = run_decompress(&cinfo, &err, bytes, &out, &min_size, &cmyk_row, &too_large);
  const ImageSize stored{int(cinfo.image_height), int(cinfo.image_width)};
  jpeg_destroy_decompress(&cinfo);
  if (too_large) throw_too_large(path, stored);
  if (!ok) throw Error("image {}: JPEG: {}", path, err.message);
}

}  // namespace kiln::data
