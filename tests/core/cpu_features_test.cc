// CPU feature detection: consistent with /proc/cpuinfo, the ISA levels include each other, the
// oneDNN cap lowers the effective level, and the start line names what actually runs.
#include "kiln/core/cpu_features.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tests/testing/cpuinfo.h"

namespace kiln {
namespace {

using testing::cpuinfo_flags;

TEST(CpuFeatures, AgreesWithProcCpuinfo) {
  const std::string flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  const CpuFeatures f = detect_cpu_features(nullptr);
  auto has = [&](const char* name) { return flags.find(std::string(" ") + name + " ") != std::string::npos; };
  EXPECT_EQ(f.avx2, has("avx2"));
  EXPECT_EQ(f.avx512f, has("avx512f"));
  EXPECT_EQ(f.avx512_bf16, has("avx512_bf16"));
  EXPECT_EQ(f.avx512_fp16, has("avx512_fp16"));
  EXPECT_EQ(f.amx_tile, has("amx_tile"));
  EXPECT_EQ(f.amx_bf16, has("amx_bf16"));
}

TEST(CpuFeatures, LevelsFollowTheFlags) {
  const CpuFeatures f = detect_cpu_features(nullptr);
  EXPECT_EQ(f.isa_cap, CpuIsa::all);
  EXPECT_EQ(f.effective_isa(), f.max_isa);
  if (f.max_isa >= CpuIsa::avx2) {
    EXPECT_TRUE(f.avx2);
  }
  if (f.max_isa >= CpuIsa::avx512_core) {
    EXPECT_TRUE(f.avx512_core && f.avx512f);
  }
  if (f.max_isa >= CpuIsa::avx512_core_bf16) {
    EXPECT_TRUE(f.avx512_bf16);
  }
  if (f.max_isa >= CpuIsa::avx512_core_amx) {
    EXPECT_TRUE(f.amx_bf16 && f.amx_tile);
  }
  if (f.avx512_bf16) {
    EXPECT_TRUE(f.avx512_core);
  }
  EXPECT_EQ(f.bf16_arithmetic(), f.max_isa >= CpuIsa::avx512_core_bf16);
}

TEST(CpuFeatures, OnednnCapLowersTheEffectiveLevel) {
  const CpuFeatures f = detect_cpu_features("AVX2");
  EXPECT_EQ(f.isa_cap, CpuIsa::avx2);
  EXPECT_LE(f.effective_isa(), CpuIsa::avx2);
  EXPECT_FALSE(f.bf16_arithmetic());
  EXPECT_FALSE(f.f16_arithmetic());
  const std::string note = precision_note(DType::bf16, f);
  EXPECT_NE(note.find("bf16 storage, f32 arithmetic"), std::string::npos) << note;
  if (f.max_isa > CpuIsa::avx2) {
    EXPECT_NE(note.find("ONEDNN_MAX_CPU_ISA=AVX2"), std::string::npos) << note;
  }
}

TEST(CpuFeatures, IsaNamesParseInAnyCase) {
  EXPECT_EQ(parse_cpu_isa("avx512_core_amx"), CpuIsa::avx512_core_amx);
  EXPECT_EQ(parse_cpu_isa("AVX512_CORE_BF16"), CpuIsa::avx512_core_bf16);
  EXPECT_EQ(parse_cpu_isa("DEFAULT"), CpuIsa::all);
  EXPECT_EQ(cpu_isa_name(CpuIsa::avx2_vnni_2), "avx2_vnni_2");
}

TEST(CpuFeatures, PrecisionNoteSaysWhatRuns) {
  CpuFeatures amx;
  amx.x86 = amx.avx2 = amx.avx512f = amx.avx512_core = amx.avx512_bf16 = amx.amx_tile = amx.amx_bf16 = true;
  amx.max_isa = CpuIsa::avx512_core_amx;
  EXPECT_NE(precision_note(DType::bf16, amx).find("bf16 arithmetic (AMX"), std::string::npos);
  EXPECT_NE(precision_note(DType::f16, amx).find("f16 storage, f32 arithmetic"), std::string::npos);
  CpuFeatures zen3;
  zen3.x86 = zen3.avx2 = zen3.fma = true;
  zen3.max_isa = CpuIsa::avx2;
  EXPECT_EQ(precision_note(DType::bf16, zen3),
            "precision: bf16 storage, f32 arithmetic: this CPU has no bf16 instructions usable here (avx2)");
  EXPECT_EQ(precision_note(DType::f32, zen3), "precision: f32 (avx2)");
}

}  // namespace
}  // namespace kiln
