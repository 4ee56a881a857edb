// The OpenBLAS provider: cblas_sgemm / cblas_dgemm (nlb/ops/gemm.hpp). Included only when
// NLB_HAVE_OPENBLAS is defined, i.e. the program links nlbudget::openblas, whose include
// directory holds OpenBLAS's cblas.h (Debian: libopenblas-dev).
#pragma once

#include <cblas.h>

#include <string_view>

#include "nlb/core/gemm_provider.hpp"
#include "nlb/ops/detail/blas_operand.hpp"

// OpenBLAS's own functions (declared in its cblas.h; repeated here for older headers).
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" char* openblas_get_corename(void);

namespace nlb::ops::detail {

/// c = alpha · a · b + beta · c with each operand in its own storage order: c's order is the
/// call's layout and an operand stored the other way is passed transposed (no copies).
template <class T>
void provider_gemm(gemm_provider::openblas, const BlasMatrix<const T>& a,
                   const BlasMatrix<const T>& b, const BlasMatrix<T>& c, T alpha, T beta) {
  const CBLAS_ORDER layout = c.row_major ? CblasRowMajor : CblasColMajor;
  const auto trans = [&](const BlasMatrix<const T>& m) {
    return m.row_major == c.row_major ? CblasNoTrans : CblasTrans;
  };
  const auto m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
             k = static_cast<int>(a.cols);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(layout, trans(a), trans(b), m, n, k, alpha, a.data, static_cast<int>(a.ld), b.data,
                static_cast<int>(b.ld), beta, c.data, static_cast<int>(c.ld));
  } else {
    cblas_dgemm(layout, trans(a), trans(b), m, n, k, alpha, a.data, static_cast<int>(a.ld), b.data,
                static_cast<int>(b.ld), beta, c.data, static_cast<int>(c.ld));
  }
}

/// False when OpenBLAS runs kernels for an older instruction set than this program is compiled
/// for. OpenBLAS picks its kernels by CPUID when it loads, and a CPU model it does not know
/// falls back to its oldest x86-64 kernels ("Prescott", SSE3): measured on an Intel model 207
/// with OpenBLAS 0.3.21, 20 GFLOP/s against Eigen's 100 (docs/benchmarks.md, "GEMM
/// providers"). Products then go to Eigen instead; OPENBLAS_CORETYPE (e.g. SkylakeX, Haswell)
/// names the kernels to use. Read once.
inline bool provider_usable(gemm_provider::openblas) {
  // The x86-64 fallbacks and the pre-Haswell cores of OpenBLAS's DYNAMIC_ARCH list.
  static constexpr std::string_view without_fma[] = {
      "Prescott",     "Core2",     "Penryn",     "Dunnington", "Nehalem", "Atom",
      "Sandybridge",  "Katmai",    "Coppermine", "Northwood",  "Banias",  "Opteron",
      "Opteron_SSE3", "Barcelona", "Bobcat",     "Athlon",     "Unknown"};
  static const bool usable = kernels_suit_build(openblas_get_corename(), without_fma);
  return usable;
}

inline void provider_set_threads(gemm_provider::openblas, int threads) {
  openblas_set_num_threads(threads);
}

}  // namespace nlb::ops::detail
