// Compiler-diagnostic guards for code that calls xsimd. Internal to nlbudget.
//
// GCC 12.2 (Debian 12) reports -Wuninitialized / -Wmaybe-uninitialized inside its own
// avx512fintrin.h whenever an AVX-512 intrinsic that starts from _mm512_undefined_*() is
// inlined (GCC bug 105593, fixed in later releases): the "uninitialized" value is the
// intentionally undefined pass-through operand, so the warning is spurious. GCC honours a
// diagnostic pragma anywhere on the inlining chain, so the kernels that call xsimd are
// wrapped in these macros; other warnings stay on.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#define NLB_XSIMD_GUARD_BEGIN                                                          \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define NLB_XSIMD_GUARD_END _Pragma("GCC diagnostic pop")
#else
#define NLB_XSIMD_GUARD_BEGIN
#define NLB_XSIMD_GUARD_END
#endif
