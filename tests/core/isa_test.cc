// Instruction-set extensions: detection agrees with /proc/cpuinfo, this build's targets are
// present on the CPU running it, the missing ones are named, and a kiln started on a CPU without
// an extension it needs stops with one line naming it (forced here by KILN_TEST_REQUIRE_ISA).
#include "kiln/core/isa.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/core/cpu_features.h"
#include "tests/testing/cpuinfo.h"
#include "tests/testing/run_command.h"

namespace kiln {
namespace {

using testing::cpuinfo_flags;

TEST(Isa, PresentAgreesWithProcCpuinfo) {
  const std::string flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  const IsaSet present = isa_present();
  for (Isa isa : {Isa::ssse3, Isa::sse4_2, Isa::popcnt, Isa::avx, Isa::avx2, Isa::fma, Isa::f16c, Isa::bmi1,
                  Isa::bmi2, Isa::movbe, Isa::avx512f, Isa::avx512bw, Isa::avx512vl, Isa::avx512_vnni,
                  Isa::avx512_bf16, Isa::avx512_fp16, Isa::amx_tile, Isa::amx_bf16}) {
    const bool listed = flags.find(std::string(" ") + isa_name(isa) + " ") != std::string::npos;
    EXPECT_EQ(isa_has(present, isa), listed) << isa_name(isa);
  }
  EXPECT_EQ(isa_has(present, Isa::sse3), flags.find(" pni ") != std::string::npos);
}

TEST(Isa, ThisBuildsExtensionsArePresent) {
  char missing[512];
  EXPECT_EQ(isa_missing(isa_compiled_for(), isa_present(), missing, sizeof missing), 0) << missing;
#ifdef __AVX2__
  EXPECT_TRUE(isa_has(isa_compiled_for(), Isa::avx2));
#else
  EXPECT_FALSE(isa_has(isa_compiled_for(), Isa::avx2));
#endif
}

TEST(Isa, MissingNamesTheAbsentOnes) {
  const IsaSet required = isa_bit(Isa::avx2) | isa_bit(Isa::avx512f) | isa_bit(Isa::amx_bf16);
  char out[64];
  EXPECT_EQ(isa_missing(required, isa_bit(Isa::avx2), out, sizeof out), 2);
  EXPECT_STREQ(out, "avx512f amx_bf16");
  EXPECT_EQ(isa_missing(required, required, out, sizeof out), 0);
  EXPECT_STREQ(out, "");
  char small[10];
  EXPECT_EQ(isa_missing(required, 0, small, sizeof small), 3);
  EXPECT_STREQ(small, "avx2 avx5");
  EXPECT_EQ(isa_names(required), "avx2 avx512f amx_bf16");
}

TEST(Isa, KilnRefusesACpuWithoutAnExtensionItNeeds) {
  int absent = 0;
  while (absent < int(Isa::count) && isa_has(isa_present(), Isa(absent))) ++absent;
  if (absent == int(Isa::count)) GTEST_SKIP() << "this CPU has every extension kiln knows";
  const std::string name = isa_name(Isa(absent));
  const auto [code, err] = testing::run_command("KILN_TEST_REQUIRE_ISA='" + name + "' " KILN_BINARY " --version",
                                                testing::Capture::stderr_only);
  EXPECT_EQ(code, 2) << err;
  EXPECT_EQ(err.find("kiln: error: this binary was built for instructions this CPU lacks (" + name + ")"), 0u)
      << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "not one line: " << err;

  const auto [ok_code, out] = testing::run_command(KILN_BINARY " cpu", testing::Capture::combined);
  EXPECT_EQ(ok_code, 0) << out;
  EXPECT_NE(out.find("kiln's own code built for: " + isa_names(isa_compiled_for())), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln
