#include "kiln/core/cpu_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KILN_X86 1
#endif

namespace kiln {
namespace {

constexpr const char* kIsaNames[] = {
    "sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core", "avx512_core_vnni",
    "avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx", "avx512_core_amx_fp16", "all"};

#ifdef KILN_X86
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = {};
  return r;
}

// XCR0 through the xgetbv instruction itself (no -mxsave intrinsic, so any x86-64 build runs it).
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }
#endif

}  // namespace

std::string cpu_isa_name(CpuIsa isa) { return kIsaNames[int(isa)]; }

CpuIsa parse_cpu_isa(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  for (int i = 0; i <= int(CpuIsa::all); ++i)
    if (lower == kIsaNames[i]) return CpuIsa(i);
  return CpuIsa::all;  // DEFAULT, ALL or a name this build does not know: no cap
}

CpuFeatures detect_cpu_features(const char* isa_cap_env) {
  CpuFeatures f;
  if (isa_cap_env && *isa_cap_env) {
    f.isa_cap_text = isa_cap_env;
    f.isa_cap = parse_cpu_isa(f.isa_cap_text);
  }
#ifdef KILN_X86
  f.x86 = true;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;     // XTILECFG, XTILEDATA
  const Regs l7 = max_leaf >= 7 ? cpuid(7, 0) : Regs{};
  const Regs l71 = max_leaf >= 7 && l7.a >= 1 ? cpuid(7, 1) : Regs{};
  const bool avx = os_avx && bit(l1.c, 28);
  f.fma = avx && bit(l1.c, 12);
  f.f16c = avx && bit(l1.c, 29);
  f.avx2 = avx && bit(l7.b, 5);
  f.avx_vnni = f.avx2 && bit(l71.a, 4);
  f.avx_ne_convert = f.avx2 && bit(l71.d, 5);
  f.avx512f = os_avx512 && bit(l7.b, 16);
  f.avx512_core = f.avx512f && bit(l7.b, 17) && bit(l7.b, 30) && bit(l7.b, 31);  // DQ BW VL
  f.avx512_vnni = f.avx512_core && bit(l7.c, 11);
  f.avx512_bf16 = f.avx512_core && bit(l71.a, 5);
  f.avx512_fp16 = f.avx512_core && bit(l7.d, 23);
  f.amx_tile = os_amx && bit(l7.d, 24);
  f.amx_bf16 = f.amx_tile && bit(l7.d, 22);
  f.amx_int8 = f.amx_tile && bit(l7.d, 25);
  f.amx_fp16 = f.amx_tile && bit(l71.a, 21);

  CpuIsa isa = CpuIsa::sse41;
  if (avx) isa = CpuIsa::avx;
  if (f.avx2 && f.fma) isa = CpuIsa::avx2;
  if (isa == CpuIsa::avx2 && f.avx_vnni) isa = CpuIsa::avx2_vnni;
  if (isa == CpuIsa::avx2_vnni && f.avx_ne_convert) isa = CpuIsa::avx2_vnni_2;
  if (f.avx512_core && f.fma) isa = CpuIsa::avx512_core;
  if (isa == CpuIsa::avx512_core && f.avx512_vnni) isa = CpuIsa::avx512_core_vnni;
  if (isa == CpuIsa::avx512_core_vnni && f.avx512_bf16) isa = CpuIsa::avx512_core_bf16;
  if (isa == CpuIsa::avx512_core_bf16 && f.avx512_fp16) isa = CpuIsa::avx512_core_fp16;
  if (isa == CpuIsa::avx512_core_fp16 && f.amx_bf16 && f.amx_int8) isa = CpuIsa::avx512_core_amx;
  if (isa == CpuIsa::avx512_core_amx && f.amx_fp16) isa = CpuIsa::avx512_core_amx_fp16;
  f.max_isa = isa;
#endif
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (!cap || !*cap) cap = std::getenv("DNNL_MAX_CPU_ISA");
    return detect_cpu_features(cap);
  }();
  return features;
}

bool CpuFeatures::bf16_arithmetic() const {
  const CpuIsa isa = effective_isa();
  // avx2_vnni_2 converts bf16 but oneDNN still multiplies in f32 there.
  return isa >= CpuIsa::avx512_core_bf16 && (avx512_bf16 || amx_bf16);
}

bool CpuFeatures::f16_arithmetic() const {
  return effective_isa() >= CpuIsa::avx512_core_fp16 && (avx512_fp16 || amx_fp16);
}

std::string CpuFeatures::flags() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx_vnni, "avx_vnni");
  add(avx_ne_convert, "avx_ne_convert");
  add(avx512f, "avx512f");
  add(avx512_core, "avx512_core");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_fp16, "avx512_fp16");
  add(amx_tile, "amx_tile");
  add(amx_bf16, "amx_bf16");
  add(amx_int8, "amx_int8");
  add(amx_fp16, "amx_fp16");
  return s.empty() ? "none of avx2/avx512/amx" : s;
}

std::string precision_note(DType compute, const CpuFeatures& cpu) {
  std::string isa = cpu_isa_name(cpu.effective_isa());
  if (cpu.isa_cap < cpu.max_isa)
    isa += fmt::format(", capped by ONEDNN_MAX_CPU_ISA={} from {}", cpu.isa_cap_text, cpu_isa_name(cpu.max_isa));
  switch (compute) {
    case DType::bf16:
      if (cpu.bf16_arithmetic())
        return fmt::format("precision: bf16 storage and bf16 arithmetic ({}; {}), f32 accumulation",
                           cpu.amx_bf16 && cpu.effective_isa() >= CpuIsa::avx512_core_amx ? "AMX" : "AVX512-BF16", isa);
      return fmt::format("precision: bf16 storage, f32 arithmetic: this CPU has no bf16 instructions "
                         "usable here ({})", isa);
    case DType::f16:
      if (cpu.f16_arithmetic())
        return fmt::format("precision: f16 storage and f16 arithmetic ({}; {}), f32 accumulation",
                           cpu.amx_fp16 && cpu.effective_isa() >= CpuIsa::avx512_core_amx_fp16 ? "AMX-FP16" : "AVX512-FP16", isa);
      return fmt::format("precision: f16 storage, f32 arithmetic: this CPU has no f16 instructions "
                         "usable here ({})", isa);
    default:
      return fmt::format("precision: f32 ({})", isa);
  }
}

}  // namespace kiln
