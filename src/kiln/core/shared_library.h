// core/shared_library.h — a library opened at run time (dlopen) instead of linked, and its
// functions looked up: for large libraries that a process may never need (cuBLASLt, NCCL).
#pragma once
#include <dlfcn.h>

#include <initializer_list>
#include <string>

#include "kiln/core/error.h"

namespace kiln {

// The first of `files` (sonames or paths) that opens; throws kiln::Error "<what>: cannot open
// ..." naming them all and dlerror's reason.
void* open_shared_library(const char* what, std::initializer_list<std::string> files);

// fn = the library's function `name`; throws kiln::Error "<what>: the library has no <name>".
template <typename F>
void bind_symbol(void* library, const char* what, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(library, name));
  if (!fn) throw Error("{}: the library has no {}", what, name);
}

}  // namespace kiln
