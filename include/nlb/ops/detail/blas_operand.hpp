// Eigen operands as a BLAS library sees them: a pointer, a leading dimension and a storage
// order (nlb/ops/gemm.hpp). Only internals of the BLAS providers use this.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <iterator>
#include <string_view>
#include <type_traits>

#include "nlb/core/matrix.hpp"

namespace nlb::ops::detail {

/// A dense matrix in memory: element (i, j) is data[i * ld + j] when row_major, data[i + j * ld]
/// otherwise.
template <class T>
struct BlasMatrix {
  T* data = nullptr;
  Index rows = 0, cols = 0, ld = 0;
  bool row_major = true;
};

// Each BLAS provider's header (gemm_openblas.hpp, gemm_blis.hpp, gemm_onednn.hpp,
// gemm_libxsmm.hpp) overloads these for its tag;
// these declarations let ops/gemm.hpp name them when no BLAS library is part of the build.
template <class Provider>
bool provider_usable(Provider) = delete;
template <class Provider>
void provider_set_threads(Provider, int) = delete;

/// False for a scalar type a provider's library has no GEMM for (oneDNN: double); those products
/// go to Eigen.
template <class Provider, class T>
inline constexpr bool provider_takes = true;

/// c = alpha · a · b + beta · c by the provider's library, and true; the measured provider
/// (gemm_measured.hpp) overloads it to return false, doing nothing, where Eigen was measured
/// fastest, and ops::gemm then runs the product in Eigen. `allocation_free`: the context's
/// setting, which only the measured provider's choice reads (a named provider runs as named).
template <class Provider, class T>
bool run_provider_gemm(Provider, const BlasMatrix<const T>& a, const BlasMatrix<const T>& b,
                       const BlasMatrix<T>& c, T alpha, T beta, bool /*allocation_free*/) {
  provider_gemm(Provider{}, a, b, c, alpha, beta);
  return true;
}

/// The threads last given to Provider's library (its pool is one per process): 0 before any.
template <class Provider>
std::atomic<int>& provider_threads_applied() {
  static std::atomic<int> threads{0};
  return threads;
}

/// True unless this program is compiled for FMA (AVX2 or FMA flags) and `kernels`, the name of
/// the kernel set a BLAS library chose for this CPU, is one of `without_fma` (its older kernel
/// sets): a library running those is slower than Eigen here. A null name counts as unknown.
template <std::size_t N>
bool kernels_suit_build([[maybe_unused]] const char* kernels,
                        [[maybe_unused]] const std::string_view (&without_fma)[N]) {
#if defined(__AVX2__) || defined(__FMA__)
  if (kernels == nullptr)
    return false;
  return std::find(std::begin(without_fma), std::end(without_fma), std::string_view(kernels)) ==
         std::end(without_fma);
#else
  return true;
#endif
}

/// True when an Eigen expression type can be handed to BLAS as it is: its coefficients lie in
/// memory (a matrix, map, block, Ref or a transpose of one) and consecutive ones of its inner
/// dimension may be adjacent (checked again at run time).
template <class Expr>
inline constexpr bool has_blas_layout = (Eigen::internal::traits<std::remove_cv_t<Expr>>::Flags &
                                         Eigen::DirectAccessBit) != 0 &&
                                        (std::remove_cv_t<Expr>::InnerStrideAtCompileTime == 1 ||
                                         std::remove_cv_t<Expr>::InnerStrideAtCompileTime ==
                                             Eigen::Dynamic);

/// The view of `m`, or false when its run-time strides do not fit BLAS (an inner stride other
/// than 1, a leading dimension smaller than its rows, sizes beyond a 32-bit BLAS index).
template <class Expr, class T>
bool blas_view(Expr& m, BlasMatrix<T>& view) {
  constexpr bool row_major = std::remove_cv_t<Expr>::IsRowMajor;
  if (m.innerStride() != 1)
    return false;
  view.data = m.data();
  view.rows = m.rows();
  view.cols = m.cols();
  view.ld = m.outerStride();
  view.row_major = row_major;
  const Index inner = row_major ? view.cols : view.rows;
  if (view.ld < inner || view.ld < 1)
    return false;
  return view.rows <= INT_MAX && view.cols <= INT_MAX && view.ld <= INT_MAX;
}

}  // namespace nlb::ops::detail
