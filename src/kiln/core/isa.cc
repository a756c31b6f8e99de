// core/isa.cc — which extensions this CPU and OS can run, and the start-up check that the CPU has
// every one this build targets. Compiled for plain x86-64 whatever the build's -march (CMakeLists)
// and calls no inline function of another file (the linker could pick that file's copy, compiled
// for the build's extensions), so it runs on any x86-64 CPU.
#include "kiln/core/isa.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KILN_X86 1
#endif

namespace kiln {
namespace {

// What the OS must save for an extension's registers to be usable (XCR0 bits).
enum class OsState { none, avx, avx512, amx };

struct IsaEntry {
  const char* name;
  unsigned leaf, subleaf;
  int reg;  // 0 eax, 1 ebx, 2 ecx, 3 edx
  int bit;
  OsState state;
};

// Indexed by Isa.
constexpr IsaEntry kIsa[] = {
    {"sse3", 1, 0, 2, 0, OsState::none},
    {"ssse3", 1, 0, 2, 9, OsState::none},
    {"sse4_1", 1, 0, 2, 19, OsState::none},
    {"sse4_2", 1, 0, 2, 20, OsState::none},
    {"popcnt", 1, 0, 2, 23, OsState::none},
    {"avx", 1, 0, 2, 28, OsState::avx},
    {"avx2", 7, 0, 1, 5, OsState::avx},
    {"fma", 1, 0, 2, 12, OsState::avx},
    {"f16c", 1, 0, 2, 29, OsState::avx},
    {"bmi1", 7, 0, 1, 3, OsState::none},
    {"bmi2", 7, 0, 1, 8, OsState::none},
    {"lzcnt", 0x80000001u, 0, 2, 5, OsState::none},
    {"movbe", 1, 0, 2, 22, OsState::none},
    {"avx512f", 7, 0, 1, 16, OsState::avx512},
    {"avx512dq", 7, 0, 1, 17, OsState::avx512},
    {"avx512bw", 7, 0, 1, 30, OsState::avx512},
    {"avx512vl", 7, 0, 1, 31, OsState::avx512},
    {"avx512cd", 7, 0, 1, 28, OsState::avx512},
    {"avx512ifma", 7, 0, 1, 21, OsState::avx512},
    {"avx512vbmi", 7, 0, 2, 1, OsState::avx512},
    {"avx512vbmi2", 7, 0, 2, 6, OsState::avx512},
    {"avx512_vnni", 7, 0, 2, 11, OsState::avx512},
    {"avx512_bitalg", 7, 0, 2, 12, OsState::avx512},
    {"avx512_vpopcntdq", 7, 0, 2, 14, OsState::avx512},
    {"avx512_vp2intersect", 7, 0, 3, 8, OsState::avx512},
    {"avx512_bf16", 7, 1, 0, 5, OsState::avx512},
    {"avx512_fp16", 7, 0, 3, 23, OsState::avx512},
    {"avx_vnni", 7, 1, 0, 4, OsState::avx},
    {"avx_ne_convert", 7, 1, 3, 5, OsState::avx},
    {"gfni", 7, 0, 2, 8, OsState::none},
    {"vaes", 7, 0, 2, 9, OsState::avx},
    {"vpclmulqdq", 7, 0, 2, 10, OsState::avx},
    {"amx_tile", 7, 0, 3, 24, OsState::amx},
    {"amx_bf16", 7, 0, 3, 22, OsState::amx},
    {"amx_int8", 7, 0, 3, 25, OsState::amx},
    {"amx_fp16", 7, 1, 0, 21, OsState::amx},
};
static_assert(sizeof(kIsa) / sizeof(kIsa[0]) == size_t(Isa::count), "one entry per Isa, in order");

IsaSet bit_of(int i) { return IsaSet(1) << i; }

#ifdef KILN_X86
// XCR0 through the instruction itself (no -mxsave intrinsic).
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

bool os_saves(OsState state, uint64_t xcr0) {
  switch (state) {
    case OsState::none: return true;
    case OsState::avx: return (xcr0 & 0x6) == 0x6;           // XMM, YMM
    case OsState::avx512: return (xcr0 & 0xe6) == 0xe6;      // and opmask, ZMM
    case OsState::amx: return (xcr0 & 0x60000) == 0x60000;   // XTILECFG, XTILEDATA
  }
  return false;
}

bool cpuid_bit(const IsaEntry& e) {
  unsigned r[4] = {0, 0, 0, 0};
  if (__get_cpuid_max(e.leaf & 0x80000000u, nullptr) < e.leaf) return false;
  if (e.subleaf > 0) {  // subleaf 0's eax: the last subleaf there is
    if (!__get_cpuid_count(e.leaf, 0, &r[0], &r[1], &r[2], &r[3]) || r[0] < e.subleaf) return false;
  }
  if (!__get_cpuid_count(e.leaf, e.subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[e.reg] >> e.bit) & 1u;
}
#endif

// Isa whose name is s[0, n), or -1.
int isa_from_name(const char* s, size_t n) {
  for (int i = 0; i < int(Isa::count); ++i)
    if (std::strlen(kIsa[i].name) == n && std::strncmp(kIsa[i].name, s, n) == 0) return i;
  return -1;
}

// KILN_TEST_REQUIRE_ISA="avx512_fp16 amx_fp16": extensions the start-up check treats as required
// besides the build's, so that a test can watch it refuse a CPU that lacks one.
IsaSet test_required() {
  const char* s = std::getenv("KILN_TEST_REQUIRE_ISA");
  IsaSet set = 0;
  while (s && *s) {
    const size_t n = std::strcspn(s, " ,");
    if (const int i = isa_from_name(s, n); i >= 0) set |= bit_of(i);
    s += n;
    s += std::strspn(s, " ,");
  }
  return set;
}

// Priority 101: before the static constructors of kiln's other files, which are compiled for the
// build's extensions.
__attribute__((constructor(101))) void refuse_a_cpu_without_the_build_isa() {
  char names[512];
  if (isa_missing(isa_compiled_for() | test_required(), isa_present(), names, sizeof names) == 0) return;
  std::fprintf(stderr,
               "kiln: error: this binary was built for instructions this CPU lacks (%s); build kiln on this "
               "machine, or a portable kiln with cmake -DKILN_NATIVE=OFF (docs/building.md, \"Portable builds\")\n",
               names);
  std::_Exit(2);
}

}  // namespace

IsaSet isa_present() {
  IsaSet set = 0;
#ifdef KILN_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool osxsave = __get_cpuid(1, &a, &b, &c, &d) && ((c >> 27) & 1u);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  for (int i = 0; i < int(Isa::count); ++i)
    if (cpuid_bit(kIsa[i]) && os_saves(kIsa[i].state, xcr0)) set |= bit_of(i);
#endif
  return set;
}

const char* isa_name(Isa isa) { return kIsa[int(isa)].name; }

int isa_missing(IsaSet required, IsaSet present, char* out, size_t size) {
  int missing = 0;
  size_t used = 0;
  if (size > 0) out[0] = '\0';
  for (int i = 0; i < int(Isa::count); ++i) {
    if (!(required & bit_of(i)) || (present & bit_of(i))) continue;
    ++missing;
    if (size == 0) continue;
    const int n = std::snprintf(out + used, size - used, "%s%s", used ? " " : "", kIsa[i].name);
    if (n > 0) used = used + size_t(n) < size ? used + size_t(n) : size - 1;
  }
  return missing;
}

}  // namespace kiln
