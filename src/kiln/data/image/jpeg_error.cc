#include "kiln/data/image/jpeg_error.h"

namespace kiln::data {

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

jpeg_error_mgr* jpeg_error_init(JpegErrorManager& err) {
  jpeg_error_mgr* mgr = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.message[0] = '\0';
  return mgr;
}

}  // namespace kiln::data
