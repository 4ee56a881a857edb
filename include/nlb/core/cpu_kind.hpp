// Which kind of CPU a program runs on, as far as the speed of its kernels is concerned: the
// vendor, the CPUID family and the widest vector instruction set it offers. The measured GEMM
// provider (nlb/core/gemm_provider.hpp) looks its recorded measurements up by this key: the same
// vendor and family run the same kernels at about the same relative speeds, and a different
// vector width changes which library is fastest (docs/benchmarks.md, "GEMM providers").
#pragma once

#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace nlb {

enum class CpuVendor { intel, amd, other };
/// The widest vector instruction set usable for float FMA: AVX-512 (F), AVX2 with FMA, or less.
enum class CpuVectorIsa { avx512, avx2, other };

struct CpuKind {
  CpuVendor vendor = CpuVendor::other;
  /// CPUID's display family (base family plus extended family): 6 for Intel's cores since
  /// 1995, 25 for AMD Zen 3/4, 26 for Zen 5; 0 when unknown.
  int family = 0;
  CpuVectorIsa isa = CpuVectorIsa::other;

  friend bool operator==(const CpuKind&, const CpuKind&) = default;
};

/// The CPU this program runs on (CPUID on x86; `other` everywhere else). Cost: a few CPUID
/// instructions; callers that ask often keep the result.
inline CpuKind this_cpu_kind() {
  CpuKind kind;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0)
    return kind;
  // The vendor string is EBX, EDX, ECX: "Genu" "ineI" "ntel" / "Auth" "enti" "cAMD".
  if (ebx == 0x756e6547u && edx == 0x49656e69u && ecx == 0x6c65746eu)
    kind.vendor = CpuVendor::intel;
  else if (ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u)
    kind.vendor = CpuVendor::amd;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0) {
    const int base = static_cast<int>((eax >> 8) & 0xf);
    kind.family = base == 0xf ? base + static_cast<int>((eax >> 20) & 0xff) : base;
  }
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    kind.isa = CpuVectorIsa::avx512;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    kind.isa = CpuVectorIsa::avx2;
#endif
  return kind;
}

/// "amd family 26 avx512" and the like, for reports and benchmark labels.
inline std::string describe(const CpuKind& kind) {
  const char* vendor = kind.vendor == CpuVendor::intel ? "intel"
                       : kind.vendor == CpuVendor::amd ? "amd"
                                                       : "other";
  const char* isa = kind.isa == CpuVectorIsa::avx512 ? "avx512"
                    : kind.isa == CpuVectorIsa::avx2 ? "avx2"
                                                     : "other";
  return std::string(vendor) + " family " + std::to_string(kind.family) + " " + isa;
}

}  // namespace nlb
