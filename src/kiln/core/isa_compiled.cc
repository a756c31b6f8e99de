// core/isa_compiled.cc — the extensions this build's -march let the compiler use, from its
// predefined macros. Compiled with the build's flags, unlike core/isa.cc.
#include "kiln/core/isa.h"

namespace kiln {

IsaSet isa_compiled_for() {
  IsaSet s = 0;
  auto add = [&s](Isa isa) { s |= isa_bit(isa); };
#ifdef __SSE3__
  add(Isa::sse3);
#endif
#ifdef __SSSE3__
  add(Isa::ssse3);
#endif
#ifdef __SSE4_1__
  add(Isa::sse4_1);
#endif
#ifdef __SSE4_2__
  add(Isa::sse4_2);
#endif
#ifdef __POPCNT__
  add(Isa::popcnt);
#endif
#ifdef __AVX__
  add(Isa::avx);
#endif
#ifdef __AVX2__
  add(Isa::avx2);
#endif
#ifdef __FMA__
  add(Isa::fma);
#endif
#ifdef __F16C__
  add(Isa::f16c);
#endif
#ifdef __BMI__
  add(Isa::bmi1);
#endif
#ifdef __BMI2__
  add(Isa::bmi2);
#endif
#ifdef __LZCNT__
  add(Isa::lzcnt);
#endif
#ifdef __MOVBE__
  add(Isa::movbe);
#endif
#ifdef __AVX512F__
  add(Isa::avx512f);
#endif
#ifdef __AVX512DQ__
  add(Isa::avx512dq);
#endif
#ifdef __AVX512BW__
  add(Isa::avx512bw);
#endif
#ifdef __AVX512VL__
  add(Isa::avx512vl);
#endif
#ifdef __AVX512CD__
  add(Isa::avx512cd);
#endif
#ifdef __AVX512IFMA__
  add(Isa::avx512ifma);
#endif
#ifdef __AVX512VBMI__
  add(Isa::avx512vbmi);
#endif
#ifdef __AVX512VBMI2__
  add(Isa::avx512vbmi2);
#endif
#ifdef __AVX512VNNI__
  add(Isa::avx512_vnni);
#endif
#ifdef __AVX512BITALG__
  add(Isa::avx512_bitalg);
#endif
#ifdef __AVX512VPOPCNTDQ__
  add(Isa::avx512_vpopcntdq);
#endif
#ifdef __AVX512VP2INTERSECT__
  add(Isa::avx512_vp2intersect);
#endif
#ifdef __AVX512BF16__
  add(Isa::avx512_bf16);
#endif
#ifdef __AVX512FP16__
  add(Isa::avx512_fp16);
#endif
#ifdef __AVXVNNI__
  add(Isa::avx_vnni);
#endif
#ifdef __AVXNECONVERT__
  add(Isa::avx_ne_convert);
#endif
#ifdef __GFNI__
  add(Isa::gfni);
#endif
#ifdef __VAES__
  add(Isa::vaes);
#endif
#ifdef __VPCLMULQDQ__
  add(Isa::vpclmulqdq);
#endif
#ifdef __AMX_TILE__
  add(Isa::amx_tile);
#endif
#ifdef __AMX_BF16__
  add(Isa::amx_bf16);
#endif
#ifdef __AMX_INT8__
  add(Isa::amx_int8);
#endif
#ifdef __AMX_FP16__
  add(Isa::amx_fp16);
#endif
  return s;
}

}  // namespace kiln
