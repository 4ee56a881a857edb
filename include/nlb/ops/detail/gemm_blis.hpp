// The BLIS provider: the typed API bli_sgemm / bli_dgemm, which takes a row and a column stride
// per operand, so every storage order goes in as it is (nlb/ops/gemm.hpp). Included only when
// NLB_HAVE_BLIS is defined, i.e. the program links nlbudget::blis (Debian: libblis-dev).
#pragma once

// BLIS's BLAS and CBLAS compatibility declarations are left out: a program may also include
// OpenBLAS's cblas.h, whose declarations of the same functions differ in their types.
#ifndef BLIS_DISABLE_BLAS
#define BLIS_DISABLE_BLAS
#endif
#ifndef BLIS_DISABLE_CBLAS
#define BLIS_DISABLE_CBLAS
#endif
#include <blis.h>
#include <string_view>
#include <utility>

#include "nlb/core/gemm_provider.hpp"
#include "nlb/ops/detail/blas_operand.hpp"

namespace nlb::ops::detail {

/// c = alpha · a · b + beta · c; each operand passes its own (row, column) strides.
template <class T>
void provider_gemm(gemm_provider::blis, const BlasMatrix<const T>& a, const BlasMatrix<const T>& b,
                   const BlasMatrix<T>& c, T alpha, T beta) {
  const auto strides = [](const auto& m) {
    return m.row_major ? std::pair<inc_t, inc_t>{m.ld, 1} : std::pair<inc_t, inc_t>{1, m.ld};
  };
  const auto [rsa, csa] = strides(a);
  const auto [rsb, csb] = strides(b);
  const auto [rsc, csc] = strides(c);
  // BLIS's typed API takes non-const pointers for inputs it does not modify.
  auto* pa = const_cast<T*>(a.data);
  auto* pb = const_cast<T*>(b.data);
  if constexpr (std::is_same_v<T, float>) {
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, c.rows, c.cols, a.cols, &alpha, pa, rsa, csa,
              pb, rsb, csb, &beta, c.data, rsc, csc);
  } else {
    bli_dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, c.rows, c.cols, a.cols, &alpha, pa, rsa, csa,
              pb, rsb, csb, &beta, c.data, rsc, csc);
  }
}

/// False when BLIS runs kernels for an older instruction set than this program is compiled for
/// (BLIS picks them by CPUID at its first call; an unknown CPU gets `generic`). Products then
/// go to Eigen instead. Read once.
inline bool provider_usable(gemm_provider::blis) {
  static constexpr std::string_view without_fma[] = {"generic", "penryn", "sandybridge"};
  static const bool usable = kernels_suit_build(bli_arch_string(bli_arch_query_id()), without_fma);
  return usable;
}

inline void provider_set_threads(gemm_provider::blis, int threads) {
  bli_thread_set_num_threads(threads);
}

}  // namespace nlb::ops::detail
