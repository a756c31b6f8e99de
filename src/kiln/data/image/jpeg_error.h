// data/image/jpeg_error.h — a libjpeg error manager that formats the message and longjmps back to
// the caller's setjmp instead of letting libjpeg exit the process.
#pragma once
#include <csetjmp>
#include <cstdio>
#include <jpeglib.h>

namespace kiln::data {

struct JpegErrorManager {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

// libjpeg's error_exit for a JpegErrorManager: formats into `message`, longjmps to `jump`.
[[noreturn]] void jpeg_error_exit(j_common_ptr cinfo);

// libjpeg's standard handlers with error_exit = jpeg_error_exit and an empty message; assign the
// result to cinfo.err before jpeg_create_*.
jpeg_error_mgr* jpeg_error_init(JpegErrorManager& err);

}  // namespace kiln::data
