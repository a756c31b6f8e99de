// core/isa.h — x86 instruction-set extensions as bits: those this CPU and OS can run (cpuid and
// xgetbv), and those the compiler was allowed to use in kiln's own code (its -march). Before any
// other code of kiln runs, core/isa.cc compares the two: a binary built with -march=native on an
// AVX-512 machine and started on an AVX2-only one stops with a one-line message naming what is
// missing, instead of dying of SIGILL in its first vector instruction.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln {

// Named as /proc/cpuinfo names them (except sse3: "pni" there; lzcnt is part of "abm").
enum class Isa : int {
  sse3, ssse3, sse4_1, sse4_2, popcnt, avx, avx2, fma, f16c, bmi1, bmi2, lzcnt, movbe,
  avx512f, avx512dq, avx512bw, avx512vl, avx512cd, avx512ifma, avx512vbmi, avx512vbmi2,
  avx512_vnni, avx512_bitalg, avx512_vpopcntdq, avx512_vp2intersect, avx512_bf16, avx512_fp16,
  avx_vnni, avx_ne_convert, gfni, vaes, vpclmulqdq, amx_tile, amx_bf16, amx_int8, amx_fp16,
  count
};

using IsaSet = uint64_t;
constexpr IsaSet isa_bit(Isa isa) { return IsaSet(1) << int(isa); }
constexpr bool isa_has(IsaSet set, Isa isa) { return (set & isa_bit(isa)) != 0; }

// This CPU's extensions that the OS also saves the registers of.
IsaSet isa_present();
// The extensions the compiler targeted in kiln's own code (core/isa_compiled.cc: its predefined
// macros under the build's -march).
IsaSet isa_compiled_for();
const char* isa_name(Isa isa);
// Writes the names of the members of `required` missing from `present` into `out`, space
// separated and NUL-terminated (truncated to `size`); returns how many are missing. Plain C, no
// allocation: it runs from the start-up check, before kiln's C++ code is known to be runnable.
int isa_missing(IsaSet required, IsaSet present, char* out, size_t size);

}  // namespace kiln
