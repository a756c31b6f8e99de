// core/cpu_features.h — what this CPU can run, asked once at start: instruction sets from
// cpuid, usable only when the OS saves their registers (xgetbv), and the ISA oneDNN is capped
// at (ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA). kiln's own code is compiled for one level
// (-march=native, or KILN_PORTABLE_ARCH, x86-64-v3 by default, for KILN_NATIVE=OFF; core/isa.h
// checks the CPU has it at start), and oneDNN picks its kernels at run time.
#pragma once
#include <string>

#include "kiln/core/dtype.h"
#include "kiln/core/isa.h"

namespace kiln {

// oneDNN's ISA levels (dnnl::cpu_isa), in order; each includes the ones before it.
enum class CpuIsa : int {
  sse41, avx, avx2, avx2_vnni, avx2_vnni_2, avx512_core, avx512_core_vnni, avx512_core_bf16,
  avx512_core_fp16, avx512_core_amx, avx512_core_amx_fp16, all
};

struct CpuFeatures {
  bool x86 = false;          // false on other architectures: everything below is false
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false;      // foundation
  bool avx512_core = false;  // F + BW + DQ + VL (oneDNN's avx512_core)
  bool avx512_vnni = false;
  bool avx512_bf16 = false;  // vdpbf16ps, vcvtne2ps2bf16
  bool avx512_fp16 = false;  // fp16 arithmetic (Sapphire Rapids)
  bool avx_ne_convert = false, avx_vnni = false;  // AVX2-level bf16/f16 conversions (avx2_vnni_2)
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false, amx_fp16 = false;
  CpuIsa max_isa = CpuIsa::sse41;  // the best level this CPU and OS support
  CpuIsa isa_cap = CpuIsa::all;    // ONEDNN_MAX_CPU_ISA (DNNL_MAX_CPU_ISA), else all
  std::string isa_cap_text;        // the variable's value as given, "" when unset

  CpuIsa effective_isa() const { return max_isa < isa_cap ? max_isa : isa_cap; }
  // bf16 / f16 arithmetic (dot products) that oneDNN may use under the cap.
  bool bf16_arithmetic() const;
  bool f16_arithmetic() const;
  // "avx2 fma f16c avx512f ... amx_bf16" (the detected flags that are set).
  std::string flags() const;
};

// Detected once (thread-safe) and cached; the environment cap is read at that time.
const CpuFeatures& cpu_features();
// Detection itself; `isa_cap_env` is the value of ONEDNN_MAX_CPU_ISA (nullptr: unset). For tests.
CpuFeatures detect_cpu_features(const char* isa_cap_env);

// "avx512_core_amx" — oneDNN's spelling of the level, lower case.
std::string cpu_isa_name(CpuIsa isa);
// Parses oneDNN's names (AVX2, AVX512_CORE_BF16, ALL, DEFAULT, ...; any case). Unknown -> all.
CpuIsa parse_cpu_isa(const std::string& text);

// "avx2 fma f16c": the names of the extensions in `set`, in core/isa.h's order ("none" if empty).
std::string isa_names(IsaSet set);

// One line for the start of a run: what precision actually runs for `compute` on `cpu`, e.g.
// "precision: bf16 storage, f32 arithmetic: this CPU has no bf16 instructions (avx2)".
std::string precision_note(DType compute, const CpuFeatures& cpu);

}  // namespace kiln
