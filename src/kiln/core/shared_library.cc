#include "kiln/core/shared_library.h"

namespace kiln {

void* open_shared_library(const char* what, std::initializer_list<std::string> files) {
  std::string tried;
  for (const std::string& file : files) {
    if (void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    tried += (tried.empty() ? "" : ", ") + file;
  }
  throw Error("{}: cannot open {}: {}", what, tried, ::dlerror());
}

}  // namespace kiln
