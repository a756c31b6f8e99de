#include "kiln/core/cpu_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace kiln {
namespace {

constexpr const char* kIsaNames[] = {
    "sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core", "avx512_core_vnni",
    "avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx", "avx512_core_amx_fp16", "all"};

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
#if defined(__x86_64__) || defined(__i386__)
  f.x86 = true;
#endif
  const IsaSet p = isa_present();
  auto has = [p](Isa isa) { return isa_has(p, isa); };
  f.fma = has(Isa::fma);
  f.f16c = has(Isa::f16c);
  f.avx2 = has(Isa::avx2);
  f.avx_vnni = f.avx2 && has(Isa::avx_vnni);
  f.avx_ne_convert = f.avx2 && has(Isa::avx_ne_convert);
  f.avx512f = has(Isa::avx512f);
  f.avx512_core = f.avx512f && has(Isa::avx512dq) && has(Isa::avx512bw) && has(Isa::avx512vl);
  f.avx512_vnni = f.avx512_core && has(Isa::avx512_vnni);
  f.avx512_bf16 = f.avx512_core && has(Isa::avx512_bf16);
  f.avx512_fp16 = f.avx512_core && has(Isa::avx512_fp16);
  f.amx_tile = has(Isa::amx_tile);
  f.amx_bf16 = f.amx_tile && has(Isa::amx_bf16);
  f.amx_int8 = f.amx_tile && has(Isa::amx_int8);
  f.amx_fp16 = f.amx_tile && has(Isa::amx_fp16);

  CpuIsa isa = CpuIsa::sse41;
  if (has(Isa::avx)) isa = CpuIsa::avx;
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

std::string isa_names(IsaSet set) {
  char names[1024];  // all 36 names and their spaces take 318 characters
  return isa_missing(set, 0, names, sizeof names) ? names : "none";  // every member is missing from none
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
