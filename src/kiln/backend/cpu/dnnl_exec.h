// backend/cpu/dnnl_exec.h — runs a oneDNN primitive with its arguments in a stack array.
// dnnl::primitive::execute takes them as an std::unordered_map, which allocates on every call;
// the steady-state step allocates nothing in kiln's code (tests/train/memory_test.cc).
// Internal to backend/cpu.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <initializer_list>

#include "kiln/core/error.h"

namespace kiln::ops::cpu {

// One argument: DNNL_ARG_* and the memory object passed as it.
struct DnnlArg {
  int arg;
  const dnnl::memory& memory;
};

inline void execute(const dnnl::primitive& p, const dnnl::stream& stream, std::initializer_list<DnnlArg> args) {
  constexpr size_t kMaxArgs = 8;
  KILN_CHECK(args.size() <= kMaxArgs, "oneDNN primitive with {} arguments, above kiln's {}", args.size(), kMaxArgs);
  dnnl_exec_arg_t c_args[kMaxArgs];
  int n = 0;
  for (const DnnlArg& a : args) c_args[n++] = {a.arg, a.memory.get()};
  dnnl::error::wrap_c_api(dnnl_primitive_execute(p.get(), stream.get(), n, c_args), "could not execute a primitive");
}

inline void reorder(const dnnl::reorder& r, const dnnl::stream& stream, const dnnl::memory& from,
                    const dnnl::memory& to) {
  execute(r, stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

}  // namespace kiln::ops::cpu
